package server

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
)

// StreamBuffer is how many responses may wait to be sent on one Sessions
// stream, across all its channels. A client that reads slower than that
// loses the stream (its sessions resume on a new one and re-ask by
// sequence number) rather than the server dropping a grant or growing
// without bound. The queue grows with its backlog, so an idle stream
// costs nothing for it.
const StreamBuffer = 4 * 4096

var (
	errStreamNotLeader = status.Error(codes.Unavailable, "this member stopped leading; reconnect to the leader")
	errStreamSlow      = status.Error(codes.ResourceExhausted, "session stream: client reads too slowly; reconnect and resume")
	// errSessionRetired refuses the per-session Session stream: sessions
	// are channels of a Sessions stream, the one protocol served.
	errSessionRetired = status.Error(codes.Unimplemented,
		"baton.v1.Baton/Session was retired: this client is too old; use a client that speaks Sessions (baton.v1.Baton/Sessions)")
)

// Session implements batonpb.BatonServer: the retired per-session stream,
// refused with Unimplemented and a message that names the fix.
func (s *Server) Session(batonpb.Baton_SessionServer) error { return errSessionRetired }

// sessionsStream is one Sessions stream: many channels whose answers and
// pushes share one queue and one sender, so that the answers of one
// applied batch leave in one message and one socket write.
type sessionsStream struct {
	// sendMu is held by whoever takes and sends the queue, the stream's
	// sender or the flusher (flush.go), so that what one took leaves
	// before what the other takes next. It comes before every other lock.
	sendMu sync.Mutex
	// fast, when set, is the stream's plain TCP framing, which the
	// flusher may write to without blocking; finished (under sendMu): the
	// handler returned, so the flusher sends nothing more.
	fast     *connStream
	finished bool
	// out and spare are sendQueued's, kept between its calls (under
	// sendMu): its message, and an emptied queue for take to put back.
	out   sendBuffers
	spare []reply

	mu       sync.Mutex
	queue    []reply               // written by hub.send only, taken by the sender
	overflow bool                  // the client read too slowly: the stream fails
	channels map[uint64]*channel   // by number, while the client may not reuse it
	attached map[*channel]struct{} // attached to the hub by this stream
	closed   bool                  // the handler returned
	ready    chan struct{}         // wakes the sender (capacity 1): see hub.send

	dropOnce sync.Once
	dropErr  error
	dropped  chan struct{} // closed when this member stopped leading (hub.dropAll)
}

// reply is one message for a channel's client: an answer or a push, or
// the channel's end.
type reply struct {
	ch   *channel
	resp *batonpb.SessionResponse
	end  bool
	err  error // with end: why (nil: cleanly)
	// sign, when set, is the mode of the grants resp carries, which the
	// sender signs (signing.go).
	sign *grantMode
}

func newSessionsStream() *sessionsStream {
	return &sessionsStream{channels: make(map[uint64]*channel), attached: make(map[*channel]struct{}),
		ready: make(chan struct{}, 1), dropped: make(chan struct{})}
}

// take returns everything queued, in order, and whether the queue
// overflowed; the queue starts again in spare. The numbers of channels
// whose end is among the replies are free from here on: the client may
// use one again as soon as it reads the end, possibly before the sender
// is done with the rest.
func (st *sessionsStream) take() ([]reply, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.queue
	st.queue, st.spare = st.spare, nil
	for _, r := range q {
		if r.end && st.channels[r.ch.id] == r.ch {
			delete(st.channels, r.ch.id)
		}
	}
	return q, st.overflow
}

// drop ends the whole stream with err once what is queued is sent: this
// member stopped leading, so its client should not keep a stream to it.
func (st *sessionsStream) drop(err error) {
	st.dropOnce.Do(func() {
		st.dropErr = err
		close(st.dropped)
	})
}

// Sessions implements batonpb.BatonServer: the client's sessions, each a
// channel of one gRPC stream. A receiver routes each request to its
// channel (route); answers and pushes come back through hub.send, and
// this handler's loop sends what is queued.
func (s *Server) Sessions(gs batonpb.Baton_SessionsServer) error {
	ctx, cancel := context.WithCancel(gs.Context())
	st := newSessionsStream()
	// Nothing waits for the goroutines: the receiver returns once gRPC
	// ends the stream, which it does only after this handler returned, and
	// keepalives and attaches end with ctx. What they send after that is
	// dropped, and what they attach is detached again (attach).
	defer func() {
		cancel()
		st.mu.Lock()
		st.closed = true
		chs := make([]*channel, 0, len(st.attached))
		for ch := range st.attached {
			chs = append(chs, ch)
		}
		st.mu.Unlock()
		for _, ch := range chs {
			s.hub.detach(ch)
			s.hub.end(ch, nil)
		}
	}()
	if cs, ok := gs.(*connStream); ok && cs.raw != nil {
		s.startFlusher()
		st.fast = cs
		defer func() {
			st.sendMu.Lock()
			st.finished = true
			st.sendMu.Unlock()
		}()
	}
	s.hub.attachStream(st)
	defer s.hub.detachStream(st)
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := gs.Recv()
			if err == nil {
				for _, r := range msg.GetRequests() {
					if err = s.route(ctx, st, r); err != nil {
						break
					}
				}
			}
			if err != nil {
				recvErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-st.ready:
		case <-st.dropped:
			// The channels' ends (dropAll ended every channel first) go
			// out before the stream's.
			if err := s.sendOwn(gs, st); err != nil {
				return err
			}
			return st.dropErr
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.stopC:
			return errStreamNotLeader
		}
		if err := s.sendOwn(gs, st); err != nil {
			return err
		}
	}
}

// sendOwn is the stream's sender's turn: what the flusher left unwritten,
// then everything queued.
func (s *Server) sendOwn(gs batonpb.Baton_SessionsServer, st *sessionsStream) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.fast != nil {
		if err := st.fast.flushPending(); err != nil {
			return err
		}
	}
	return s.sendQueued(gs, st)
}

// maxStreamMessage bounds one Sessions message: a client receives at
// most 4 MiB in one (gRPC's default), and a burst of queued answers (a
// resume's list of holds above all) could be more.
const maxStreamMessage = 1 << 20

// sendQueued sends everything queued on st, in as few messages of at most
// about maxStreamMessage bytes as it takes: these are the bytes leaving.
// The caller holds st.sendMu.
func (s *Server) sendQueued(gs sender, st *sessionsStream) error {
	q, overflow := st.take()
	if overflow {
		return errStreamSlow
	}
	var err error
	// connStream.Send encodes the message before it returns, so on the
	// framing the stream's one message and its channel responses serve
	// every send. gRPC may still read a message after Send returned
	// (its stats handlers), so there each send has its own.
	b := &st.out
	switch gs.(type) {
	case *connStream, *nonBlocking:
	default:
		b = new(sendBuffers)
	}
	for start := 0; start < len(q) && err == nil; {
		if n := len(q) - start; cap(b.crs) < n {
			b.crs = make([]batonpb.ChannelResponse, n)
			b.ptrs = make([]*batonpb.ChannelResponse, 0, n)
		}
		b.msg.Responses = b.ptrs[:0]
		for size := 0; start < len(q); start++ {
			r := q[start]
			if r.sign != nil {
				s.signReply(r)
			}
			n := replySize(r)
			if len(b.msg.Responses) > 0 && size+n > maxStreamMessage {
				break
			}
			size += n
			cr := &b.crs[len(b.msg.Responses)]
			cr.Channel, cr.Response, cr.End = r.ch.id, r.resp, nil
			if r.end {
				cr.End = &batonpb.ChannelEnd{Error: s.toWire(r.err)}
			}
			b.msg.Responses = append(b.msg.Responses, cr)
		}
		err = gs.Send(&b.msg)
		s.streamMessages.Add(1)
		s.streamResponses.Add(uint64(len(b.msg.Responses)))
		// What was sent is not kept alive by the buffers.
		clear(b.crs[:len(b.msg.Responses)])
		clear(b.msg.Responses)
	}
	b.msg.Responses = nil
	if cap(b.crs) > keptReplies {
		b.crs, b.ptrs = nil, nil
	}
	for _, r := range q {
		if r.end {
			s.endChannel(st, r.ch)
		}
	}
	if cap(q) <= keptReplies {
		clear(q)
		st.spare = q[:0]
	}
	return err
}

// keptReplies bounds the replies a stream's buffers keep room for
// between sends: a burst past it is not paid for by an idle stream.
const keptReplies = 256

// sendBuffers is the message sendQueued sends, which a stream on the
// framing reuses from one send to the next.
type sendBuffers struct {
	msg  batonpb.SessionsResponse
	crs  []batonpb.ChannelResponse
	ptrs []*batonpb.ChannelResponse
}

// sender is where sendQueued sends: the stream, or the flusher's
// non-blocking writer of it.
type sender interface {
	Send(*batonpb.SessionsResponse) error
}

// replySize bounds the bytes of r in a Sessions message: a list of holds
// is sized, any other answer is small (a name, a holder, an error: under
// 2 KiB), and sizing every one would cost on every answer.
func replySize(r reply) int {
	if h := r.resp.GetHolds(); h != nil {
		return proto.Size(r.resp) + 16
	}
	return 2 << 10
}

// endChannel releases what a channel whose end was sent held (take freed
// its number).
func (s *Server) endChannel(st *sessionsStream, ch *channel) {
	ch.cancel()
	s.hub.detach(ch)
	st.mu.Lock()
	delete(st.attached, ch)
	st.mu.Unlock()
}

// route gives one request to its channel, starting the channel if it is
// new. Only a malformed stream is an error: it ends the stream.
func (s *Server) route(ctx context.Context, st *sessionsStream, r *batonpb.ChannelRequest) error {
	id := r.GetChannel()
	if id == 0 {
		return status.Error(codes.InvalidArgument, "sessions stream: channel 0 is reserved")
	}
	st.mu.Lock()
	ch := st.channels[id]
	switch {
	case r.GetDetach():
		serving := false
		if ch != nil {
			ch.detached = true
			serving = ch.serving
		}
		st.mu.Unlock()
		if ch != nil {
			ch.cancel()
		}
		if serving {
			s.hub.end(ch, nil)
		}
		return nil
	case ch == nil:
		cctx, ccancel := context.WithCancel(ctx)
		ch = &channel{id: id, stream: st, ctx: cctx, cancel: ccancel}
		st.channels[id] = ch
		st.mu.Unlock()
		go s.attach(ch, r.GetRequest())
		return nil
	case !ch.serving:
		ch.pending = append(ch.pending, r.GetRequest())
		st.mu.Unlock()
		return nil
	}
	st.mu.Unlock()
	s.serve(ch, r.GetRequest())
	return nil
}

// attach opens or resumes the session of a new channel, answers the first
// request, then serves the requests that came meanwhile, in order.
func (s *Server) attach(ch *channel, first *batonpb.SessionRequest) {
	st := ch.stream
	who, err := s.principal(ch.ctx)
	var (
		id       uint64
		openResp *batonpb.OpenSessionResponse
		secret   fsm.SecretHash
	)
	if err == nil {
		id, openResp, secret, err = s.attachSession(ch.ctx, first)
	}
	if err != nil {
		s.hub.end(ch, err)
		return
	}
	// Written before the hub or the receiver can see ch.
	ch.session, ch.secret, ch.principal = id, secret, who
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	st.attached[ch] = struct{}{}
	st.mu.Unlock()
	// The open answer goes first: nothing can be pushed to ch before the
	// hub knows it.
	s.hub.send(reply{ch: ch, resp: &batonpb.SessionResponse{Id: first.GetId(), Kind: &batonpb.SessionResponse_Open{Open: openResp}}}, false)
	s.hub.attach(ch)
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		// The handler returned meanwhile and may have missed ch.
		s.hub.detach(ch)
		s.hub.end(ch, nil)
		return
	}
	if first.GetResume() != nil {
		s.pushHolds(ch)
	}
	for {
		st.mu.Lock()
		p := ch.pending
		ch.pending = nil
		if len(p) == 0 {
			detached := ch.detached
			ch.serving = !detached
			st.mu.Unlock()
			if detached {
				s.hub.end(ch, nil)
			}
			return
		}
		st.mu.Unlock()
		for _, req := range p {
			s.serve(ch, req)
		}
	}
}

// attachSession handles the first request of a channel: open or resume.
// It returns the session and the hash of its secret, which the request
// proved (a resume) or set (an open).
func (s *Server) attachSession(ctx context.Context, first *batonpb.SessionRequest) (uint64, *batonpb.OpenSessionResponse, fsm.SecretHash, error) {
	switch k := first.GetKind().(type) {
	case *batonpb.SessionRequest_Open:
		resp, err := s.openSession(ctx, k.Open)
		if err != nil {
			return 0, nil, fsm.SecretHash{}, err
		}
		return resp.GetSessionId(), resp, secretOf(resp.GetSecret()), nil
	case *batonpb.SessionRequest_Resume:
		id := k.Resume.GetSessionId()
		if id == 0 {
			return 0, nil, fsm.SecretHash{}, invalidf("resume.session_id is required")
		}
		secret := secretOf(k.Resume.GetSecret())
		// A resume counts as a keepalive: it proves the client is alive,
		// and that it is the session's owner.
		ka, err := s.keepAlive(ctx, id, secret.Bytes())
		if err != nil {
			return 0, nil, fsm.SecretHash{}, err
		}
		return id, &batonpb.OpenSessionResponse{SessionId: id, Ttl: ka.GetTtl()}, secret, nil
	default:
		return 0, nil, fsm.SecretHash{}, invalidf("the first message of a session stream must be open or resume")
	}
}

// holdsPerMessage and holdsBytesPerMessage bound one SessionHolds message
// (a session may hold fsm.MaxHoldsPerSession locks, with names of up to
// rules.MaxNameLen bytes): far below what a client receives in one message
// (gRPC's default, 4 MiB).
const (
	holdsPerMessage      = 4096
	holdsBytesPerMessage = 256 << 10
)

// pushHolds sends the holds of ch's session, which the hub already
// knows: a hold that ends after the read is pushed as HoldLost too, and
// one that ended before it is missing from the list, so the client learns
// of every hold it lost while it was away; and of each hold a Revoke
// asked to end, in revoking.
func (s *Server) pushHolds(ch *channel) {
	var (
		refs  []fsm.HoldRef
		index uint64
	)
	s.node.View(func(m *fsm.Machine) {
		refs, index = m.HoldsOf(ch.session), m.AppliedIndex()
	})
	for start := 0; ; {
		msg := &batonpb.SessionHolds{Index: index}
		for size := 0; start < len(refs) && len(msg.Holds) < holdsPerMessage && size < holdsBytesPerMessage; start++ {
			r := refs[start]
			msg.Holds = append(msg.Holds, &batonpb.HoldLost{Name: r.Lock, OwnerKey: r.OwnerKey, Token: r.Token})
			if r.RevokeGraceNanos != 0 {
				msg.Revoking = append(msg.Revoking, revokeRequested(r.Lock, r.OwnerKey, r.Token, r.RevokeGraceNanos, r.RevokeDeadlineUnixNano).GetRevokeRequested())
			}
			size += len(r.Lock) + len(r.OwnerKey) + 16
		}
		msg.Done = start == len(refs)
		s.hub.send(reply{ch: ch, resp: &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Holds{Holds: msg}}}, false)
		if msg.Done {
			return
		}
	}
}
