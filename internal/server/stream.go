package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// StreamBuffer is how many responses may wait to be sent on one session
// stream. A client that reads slower than that loses the stream (it
// resumes and re-asks by sequence number) rather than the server dropping
// a grant or growing without bound. The queue grows with its backlog, so
// an idle stream costs nothing for it.
const StreamBuffer = 4096

var (
	errStreamNotLeader = status.Error(codes.Unavailable, "this member stopped leading; reconnect to the leader")
	errStreamSlow      = status.Error(codes.ResourceExhausted, "session stream: client reads too slowly; reconnect and resume")
)

// stream is one attached session stream.
type stream struct {
	session uint64
	// secret is the hash of the secret the stream's first message showed:
	// every request on the stream carries it to the state machine.
	secret fsm.SecretHash
	// principal is the user the stream authenticated as when it opened
	// (empty while authentication is off), stamped on its commands.
	principal string
	closing   atomic.Bool // the client asked to close the session

	// A channel of a Sessions stream queues on its mux instead (mux.go).
	mux     *mux
	channel *muxChannel

	mu     sync.Mutex
	queue  []*batonpb.SessionResponse
	ready  chan struct{} // signalled (capacity 1) when queue became non-empty
	once   sync.Once
	endErr error
	ended  chan struct{}
}

func newStream(session uint64, secret fsm.SecretHash, principal string) *stream {
	return &stream{session: session, secret: secret, principal: principal, ready: make(chan struct{}, 1), ended: make(chan struct{})}
}

// push queues r for sending without blocking and wakes the sender; a
// full queue ends the stream.
func (st *stream) push(r *batonpb.SessionResponse) {
	if w := st.queueResponse(r); w != nil {
		poke(w)
	}
}

// pushLater is push for the Ready loop: the sender is woken by the hub's
// flush at the end of the loop's batch, so the answers of one batch leave
// together instead of one socket write each.
func (st *stream) pushLater(r *batonpb.SessionResponse, h *hub) {
	if w := st.queueResponse(r); w != nil {
		h.wakeLater(w)
	}
}

// queueResponse queues r and returns the channel that wakes its sender,
// or nil when r was dropped (the stream ended).
func (st *stream) queueResponse(r *batonpb.SessionResponse) chan struct{} {
	st.mu.Lock()
	select {
	case <-st.ended:
		st.mu.Unlock()
		return nil
	default:
	}
	if st.mux != nil {
		st.mux.add(muxItem{ch: st.channel, st: st, resp: r})
		st.mu.Unlock()
		return st.mux.ready
	}
	if len(st.queue) >= StreamBuffer {
		st.mu.Unlock()
		st.end(errStreamSlow)
		return nil
	}
	st.queue = append(st.queue, r)
	st.mu.Unlock()
	return st.ready
}

// poke signals a capacity-1 wake-up channel without blocking.
func poke(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// take returns everything queued, in order, and empties the queue.
func (st *stream) take() []*batonpb.SessionResponse {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.queue
	st.queue = nil
	return q
}

// end ends the stream with err (nil: after the queued responses are sent).
func (st *stream) end(err error) {
	st.once.Do(func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.endErr = err
		close(st.ended)
		if st.mux != nil {
			// After everything pushed before it, as a Session stream
			// flushes its queue before it returns.
			st.mux.add(muxItem{ch: st.channel, st: st, end: true, err: err})
			poke(st.mux.ready)
		}
	})
}

// Session implements batonpb.BatonServer: one client session's stream.
func (s *Server) Session(gs batonpb.Baton_SessionServer) error {
	ctx := gs.Context()
	first, err := gs.Recv()
	if err != nil {
		return err
	}
	who, err := s.principal(ctx)
	if err != nil {
		return s.toStatus(err)
	}
	id, openResp, secret, err := s.attachSession(ctx, first)
	if err != nil {
		return s.toStatus(err)
	}
	st := newStream(id, secret, who)
	s.hub.attach(st)
	defer s.hub.detach(st)
	if err := gs.Send(&batonpb.SessionResponse{Id: first.GetId(), Kind: &batonpb.SessionResponse_Open{Open: openResp}}); err != nil {
		return err
	}
	if first.GetResume() != nil {
		s.pushHolds(st, id)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Nothing waits for the receiver: it returns once gRPC ends the
	// stream, which it does only after this handler returned. Waiting for
	// it here would hold a stream this member can no longer serve open for
	// as long as its client keeps it (found writing the Sessions stream).
	// Keepalives end with ctx; what they push after the end is dropped.
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			s.serveStreamRequest(ctx, st, req)
		}
	}()
	for {
		select {
		case <-st.ready:
			for _, r := range st.take() {
				if err := gs.Send(r); err != nil {
					cancel()
					return err
				}
			}
		case err := <-recvErr:
			cancel()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-st.ended:
			cancel()
			// Flush what is queued (the session_lost notice among it).
			for _, r := range st.take() {
				if err := gs.Send(r); err != nil {
					return err
				}
			}
			return st.endErr
		case <-s.stopC:
			cancel()
			return errStreamNotLeader
		}
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

// pushHolds queues the session's holds on st, which the hub already
// knows: a hold that ends after the read is pushed as HoldLost too, and
// one that ended before it is missing from the list, so the client learns
// of every hold it lost while it was away.
func (s *Server) pushHolds(st *stream, id uint64) {
	var (
		refs  []fsm.HoldRef
		index uint64
	)
	s.node.View(func(m *fsm.Machine) {
		refs, index = m.HoldsOf(id), m.AppliedIndex()
	})
	for start := 0; ; {
		msg := &batonpb.SessionHolds{Index: index}
		for size := 0; start < len(refs) && len(msg.Holds) < holdsPerMessage && size < holdsBytesPerMessage; start++ {
			r := refs[start]
			msg.Holds = append(msg.Holds, &batonpb.HoldLost{Name: r.Lock, OwnerKey: r.OwnerKey, Token: r.Token})
			size += len(r.Lock) + len(r.OwnerKey) + 16
		}
		msg.Done = start == len(refs)
		st.push(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Holds{Holds: msg}})
		if msg.Done {
			return
		}
	}
}

// attachSession handles the first message of a stream: open or resume.
// It returns the session and the hash of its secret, which the first
// message proved (a resume) or set (an open).
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

// serveStreamRequest starts one request. Mutating requests are submitted
// to the log here, in the order they arrived on the stream, and answered
// from the Ready loop when they apply: the stream is pipelined but ordered.
func (s *Server) serveStreamRequest(ctx context.Context, st *stream, req *batonpb.SessionRequest) {
	var c *streamCall
	switch req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		ac := &acquireCall{}
		ac.acq = &ac.ans
		c = &ac.streamCall
	case *batonpb.SessionRequest_Release:
		rc := &releaseCall{}
		rc.rel = &rc.ans
		c = &rc.streamCall
	default:
		c = &streamCall{}
	}
	c.s, c.st, c.req = s, st, req
	var err error
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_KeepAlive:
		go func() { // ends with ctx
			ka, err := s.keepAlive(ctx, st.session, st.secret.Bytes())
			c.reply(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_KeepAlive{KeepAlive: ka}}, err)
		}()
		return
	case *batonpb.SessionRequest_RenewHold:
		go func() { // ends with ctx
			rh, err := s.renewHold(ctx, st.session, st.secret.Bytes(), k.RenewHold)
			c.reply(&batonpb.SessionResponse{Kind: &batonpb.SessionResponse_RenewHold{RenewHold: rh}}, err)
		}()
		return
	case *batonpb.SessionRequest_Acquire:
		c.cmd, err = acquireCommand(k.Acquire)
	case *batonpb.SessionRequest_AcquireMany:
		c.cmd, err = acquireManyCommand(k.AcquireMany)
	case *batonpb.SessionRequest_Release:
		c.cmd, err = releaseCommand(k.Release)
	case *batonpb.SessionRequest_Cancel:
		c.cmd, err = cancelCommand(k.Cancel)
	case *batonpb.SessionRequest_Close:
		c.cmd, err = closeCommand(st.session, k.Close.GetSeq())
		// The close's own reply, not a session_lost push, ends this stream.
		st.closing.Store(true)
	default:
		err = invalidf("unknown or repeated session stream request")
	}
	if err == nil && c.cmd.GetSessionId() != st.session {
		err = invalidf("request names session %d on the stream of session %d", c.cmd.GetSessionId(), st.session)
	}
	if err == nil && (c.cmd.GetAcquire() != nil || c.cmd.GetAcquireMany() != nil) {
		err = s.admitGrowth(ctx, c.cmd)
	}
	if err != nil {
		c.reply(nil, err)
		return
	}
	c.cmd.WallTimeUnixNano = time.Now().UnixNano()
	c.cmd.SecretHash, c.cmd.Principal = st.secret.Bytes(), st.principal
	// The answer is queued for the stream by the Ready loop itself when the
	// entry applies (c.Complete): no goroutine per request in flight, and
	// the answers of one batch reach the stream writers together.
	if err := s.node.SubmitTo(c.cmd, c); err != nil {
		c.reply(nil, err)
	}
}

// streamCall is one request of a session stream: what answering it takes,
// in one allocation (closures over the request cost five per request, a
// tenth of the leader's allocations in own/64).
type streamCall struct {
	s   *Server
	st  *stream
	req *batonpb.SessionRequest
	cmd *fsmpb.Command // a mutating request's, once submitted
	// The answer of an acquire or a release, allocated with the call
	// (acquireCall, releaseCall); nil once used.
	acq *acquireAnswer
	rel *releaseAnswer
}

// acquireCall and releaseCall are a streamCall with room for its answer,
// for the two commonest requests: one allocation where there were two.
type acquireCall struct {
	streamCall
	ans acquireAnswer
}

type releaseCall struct {
	streamCall
	ans releaseAnswer
}

// response completes r (nil: an empty one) as the answer to c.req.
func (c *streamCall) response(r *batonpb.SessionResponse, err error) *batonpb.SessionResponse {
	if r == nil {
		r = &batonpb.SessionResponse{}
	}
	r.Id = c.req.GetId()
	r.Error = c.s.toWire(err)
	return r
}

func (c *streamCall) reply(r *batonpb.SessionResponse, err error) { c.st.push(c.response(r, err)) }

// Complete implements raftnode.Completer for a submitted request. It runs
// on the Ready loop, which wakes the stream's sender (the hub's flush) at
// the end of its batch, so the answers of one batch leave together.
func (c *streamCall) Complete(res *fsmpb.Result, _ uint64, err error) {
	if err == nil {
		err = fsm.ErrorOf(res)
	}
	var r *batonpb.SessionResponse
	// A cancel that lost the race to a grant tells the client the
	// acquire was granted, so it can release the hold.
	if err == nil || errors.Is(err, fsm.ErrNotWaiting) && res.GetAcquire() != nil {
		r = c.answer(res)
	}
	c.st.pushLater(c.response(r, err), c.s.hub)
	if err == nil && c.st.closing.Load() && c.cmd.GetCloseSession() != nil {
		c.st.end(nil)
	}
}

// answer is the response to c.req that res answers.
func (c *streamCall) answer(res *fsmpb.Result) *batonpb.SessionResponse {
	switch k := c.req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a := c.acq
		if a == nil {
			a = &acquireAnswer{}
		}
		c.acq = nil
		fillAcquireResponse(&a.acquire, c.cmd.GetSeq(), res.GetAcquire())
		a.kind.Acquire = &a.acquire
		a.resp.Kind = &a.kind
		return &a.resp
	case *batonpb.SessionRequest_Release:
		a := c.rel
		if a == nil {
			a = &releaseAnswer{}
		}
		c.rel = nil
		a.release.RemainingCount = res.GetRemainingCount()
		a.kind.Release = &a.release
		a.resp.Kind = &a.kind
		return &a.resp
	case *batonpb.SessionRequest_AcquireMany:
		out := &batonpb.AcquireManyResponse{}
		for _, o := range res.GetAcquireMany() {
			out.Results = append(out.Results, acquireToWire(c.cmd.GetSeq(), o))
		}
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_AcquireMany{AcquireMany: out}}
	case *batonpb.SessionRequest_Cancel:
		out := &batonpb.CancelResponse{}
		if a := res.GetAcquire(); a.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			out.Granted = acquireToWire(k.Cancel.GetAcquireSeq(), a)
		}
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Cancel{Cancel: out}}
	case *batonpb.SessionRequest_Close:
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Close{Close: &batonpb.CloseSessionResponse{}}}
	}
	return nil
}

// acquireAnswer and releaseAnswer are the answers to the two commonest
// requests, each message of them in one allocation.
type acquireAnswer struct {
	resp    batonpb.SessionResponse
	kind    batonpb.SessionResponse_Acquire
	acquire batonpb.AcquireResponse
}

type releaseAnswer struct {
	resp    batonpb.SessionResponse
	kind    batonpb.SessionResponse_Release
	release batonpb.ReleaseResponse
}
