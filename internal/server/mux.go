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

// MuxBuffer is how many responses may wait to be sent on one Sessions
// stream, across all its channels. A client that reads slower than that
// loses the stream (its sessions resume on a new one) rather than the
// server dropping a grant or growing without bound.
const MuxBuffer = 4 * StreamBuffer

// mux is one Sessions stream: many session streams ("channels") whose
// responses share one queue and one sender, so that the answers of one
// applied batch leave in one message and one socket write.
type mux struct {
	mu       sync.Mutex
	items    []muxItem
	overflow bool
	channels map[uint64]*muxChannel
	streams  map[*stream]struct{} // attached to the hub by this mux
	closed   bool                 // the handler returned
	ready    chan struct{}        // signalled (capacity 1) when items became non-empty

	dropOnce sync.Once
	dropErr  error
	dropped  chan struct{} // closed when this member stopped leading (hub.dropAll)
}

// drop ends the whole stream with err once what is queued is sent: this
// member stopped leading, so its client should not keep a stream to it.
func (m *mux) drop(err error) {
	m.dropOnce.Do(func() {
		m.dropErr = err
		close(m.dropped)
	})
}

// muxChannel is one channel of a mux. Guarded by mux.mu, except the
// immutable id, ctx and cancel.
type muxChannel struct {
	id       uint64
	ctx      context.Context // ends with the channel: its keepalives stop
	cancel   context.CancelFunc
	st       *stream                   // nil while the first request attaches
	pending  []*batonpb.SessionRequest // requests that came while attaching
	detached bool                      // the client detached while attaching
}

// muxItem is one queued response, or a channel's end.
type muxItem struct {
	ch   *muxChannel
	st   *stream // nil for a channel that never attached
	resp *batonpb.SessionResponse
	end  bool
	err  error // with end: why (nil: cleanly)
}

func newMux() *mux {
	return &mux{channels: make(map[uint64]*muxChannel), streams: make(map[*stream]struct{}),
		ready: make(chan struct{}, 1), dropped: make(chan struct{})}
}

// add queues it without blocking; a full queue fails the whole stream.
// The caller wakes the sender (m.ready).
func (m *mux) add(it muxItem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.overflow:
	case len(m.items) >= MuxBuffer:
		m.overflow = true
	default:
		m.items = append(m.items, it)
	}
}

// take returns everything queued, in order, and whether the queue
// overflowed. The numbers of channels whose end is among the items are
// free from here on: the client may use one again as soon as it reads the
// end, possibly before the sender is done with the rest.
func (m *mux) take() ([]muxItem, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	items := m.items
	m.items = nil
	for _, it := range items {
		if it.end && m.channels[it.ch.id] == it.ch {
			delete(m.channels, it.ch.id)
		}
	}
	return items, m.overflow
}

// Sessions implements batonpb.BatonServer: many session streams on one
// gRPC stream. Each channel is served exactly as Session serves its stream
// (serveStreamRequest, the hub's pushes); only the sending is shared.
func (s *Server) Sessions(gs batonpb.Baton_SessionsServer) error {
	ctx, cancel := context.WithCancel(gs.Context())
	m := newMux()
	// Nothing waits for the goroutines: the receiver returns once gRPC
	// ends the stream, which it does only after this handler returned, and
	// keepalives and attaches end with ctx. What they push after that is
	// dropped, and what they attach is detached again (muxAttach).
	defer func() {
		cancel()
		m.mu.Lock()
		m.closed = true
		sts := make([]*stream, 0, len(m.streams))
		for st := range m.streams {
			sts = append(sts, st)
		}
		m.mu.Unlock()
		for _, st := range sts {
			s.hub.detach(st)
			st.end(nil)
		}
	}()
	s.hub.attachMux(m)
	defer s.hub.detachMux(m)
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := gs.Recv()
			if err == nil {
				for _, r := range msg.GetRequests() {
					if err = s.muxRequest(ctx, m, r); err != nil {
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
		case <-m.ready:
		case <-m.dropped:
			// The channels' ends (dropAll ended every stream first) go
			// out before the stream's.
			if err := s.sendMux(gs, m); err != nil {
				return err
			}
			return m.dropErr
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.stopC:
			return errStreamNotLeader
		}
		if err := s.sendMux(gs, m); err != nil {
			return err
		}
	}
}

// maxMuxMessage bounds one Sessions message: a client receives at most
// 4 MiB in one (gRPC's default), and a burst of queued answers (a resume's
// list of holds above all) could be more.
const maxMuxMessage = 1 << 20

// sendMux sends everything queued on m, in as few messages of at most
// about maxMuxMessage bytes as it takes.
func (s *Server) sendMux(gs batonpb.Baton_SessionsServer, m *mux) error {
	items, overflow := m.take()
	if overflow {
		return errStreamSlow
	}
	var err error
	for start := 0; start < len(items) && err == nil; {
		// Send encodes the message before it returns: one block holds its
		// channel responses.
		crs := make([]batonpb.ChannelResponse, len(items)-start)
		out := &batonpb.SessionsResponse{Responses: make([]*batonpb.ChannelResponse, 0, len(crs))}
		for size := 0; start < len(items); start++ {
			it := items[start]
			n := muxItemSize(it)
			if len(out.Responses) > 0 && size+n > maxMuxMessage {
				break
			}
			size += n
			cr := &crs[len(out.Responses)]
			cr.Channel, cr.Response = it.ch.id, it.resp
			if it.end {
				cr.End = &batonpb.ChannelEnd{Error: s.toWire(it.err)}
			}
			out.Responses = append(out.Responses, cr)
		}
		err = gs.Send(out)
		s.muxMessages.Add(1)
		s.muxResponses.Add(uint64(len(out.Responses)))
	}
	for _, it := range items {
		if it.end {
			s.endChannel(m, it)
		}
	}
	return err
}

// muxItemSize bounds the bytes of it in a Sessions message: a list of
// holds is sized, any other answer is small (a name, a holder, an error:
// under 2 KiB), and sizing every one would cost on every answer.
func muxItemSize(it muxItem) int {
	if h := it.resp.GetHolds(); h != nil {
		return proto.Size(it.resp) + 16
	}
	return 2 << 10
}

// endChannel releases what a channel whose end was sent held (take freed
// its number).
func (s *Server) endChannel(m *mux, it muxItem) {
	it.ch.cancel()
	if it.st != nil {
		s.hub.detach(it.st)
	}
	m.mu.Lock()
	delete(m.streams, it.st)
	m.mu.Unlock()
}

// muxRequest routes one request to its channel, starting the channel if
// it is new. Only a malformed stream is an error: it ends the stream.
func (s *Server) muxRequest(ctx context.Context, m *mux, r *batonpb.ChannelRequest) error {
	id := r.GetChannel()
	if id == 0 {
		return status.Error(codes.InvalidArgument, "sessions stream: channel 0 is reserved")
	}
	m.mu.Lock()
	ch := m.channels[id]
	switch {
	case r.GetDetach():
		var st *stream
		if ch != nil {
			ch.detached = true
			st = ch.st
		}
		m.mu.Unlock()
		if ch != nil {
			ch.cancel()
		}
		if st != nil {
			st.end(nil)
		}
		return nil
	case ch == nil:
		cctx, ccancel := context.WithCancel(ctx)
		ch = &muxChannel{id: id, ctx: cctx, cancel: ccancel}
		m.channels[id] = ch
		m.mu.Unlock()
		go s.muxAttach(m, ch, r.GetRequest())
		return nil
	case ch.st == nil:
		ch.pending = append(ch.pending, r.GetRequest())
		m.mu.Unlock()
		return nil
	}
	st := ch.st
	m.mu.Unlock()
	s.serveStreamRequest(ch.ctx, st, r.GetRequest())
	return nil
}

// muxAttach opens or resumes the session of a new channel, answers the
// first request, then serves the requests that came meanwhile, in order.
func (s *Server) muxAttach(m *mux, ch *muxChannel, first *batonpb.SessionRequest) {
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
		m.add(muxItem{ch: ch, end: true, err: err})
		poke(m.ready)
		return
	}
	st := newStream(id, secret, who)
	st.mux, st.channel = m, ch
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.streams[st] = struct{}{}
	m.mu.Unlock()
	// The open answer goes first: nothing can be pushed to st before the
	// hub knows it.
	st.push(&batonpb.SessionResponse{Id: first.GetId(), Kind: &batonpb.SessionResponse_Open{Open: openResp}})
	s.hub.attach(st)
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		// The handler returned meanwhile and may have missed st.
		s.hub.detach(st)
		st.end(nil)
		return
	}
	if first.GetResume() != nil {
		s.pushHolds(st, id)
	}
	for {
		m.mu.Lock()
		p := ch.pending
		ch.pending = nil
		if len(p) == 0 {
			detached := ch.detached
			if !detached {
				ch.st = st
			}
			m.mu.Unlock()
			if detached {
				st.end(nil)
			}
			return
		}
		m.mu.Unlock()
		for _, req := range p {
			s.serveStreamRequest(ch.ctx, st, req)
		}
	}
}
