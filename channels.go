package baton

// Sessions share one stream per member: the client's Sessions stream
// carries every session's requests and answers as channels, so that what
// many sessions queue at once leaves in one message and one socket write,
// and the server answers a whole applied batch the same way.

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/api/streamconn"
	"github.com/batonlock/baton/api/wire"
)

// sessionMux is the client's Sessions stream to one member.
type sessionMux struct {
	c      *Client
	addr   string
	gs     sessionsStream
	cancel context.CancelFunc
	wake   chan struct{} // the sender has work

	mu    sync.Mutex
	err   error // why the stream broke; nil while it works
	next  uint64
	chans map[uint64]*muxChan
	sendq []*batonpb.ChannelRequest
}

// muxChan is one session's channel on a sessionMux: the only stream a
// session reads and writes. Send only queues for the stream's sender. The
// channel's responses are read with Recv until the session hands them off
// (handOff): from then on the stream's reader delivers them itself, one
// goroutine hand-off fewer per answer.
type muxChan struct {
	m    *sessionMux
	id   uint64
	wake chan struct{} // Recv or waitEnd has something to return
	dmu  sync.Mutex    // held while delivering to handler: keeps the order

	// Guarded by m.mu.
	q       []*batonpb.SessionResponse
	end     error // io.EOF when the channel ended cleanly
	handler func(*batonpb.SessionResponse)
	marked  bool // on the reader's list of channels to deliver to
}

// channel opens a channel to addr for one session stream; it is detached
// when ctx ends.
func (c *Client) channel(ctx context.Context, addr string) (*muxChan, error) {
	for attempt := 1; ; attempt++ {
		m, err := c.sessionMux(ctx, addr)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		if err := m.err; err != nil {
			// Broken since it was looked up: it is off the client's
			// list already, the next lookup starts a new stream. A
			// member that ends each at once is the caller's to back
			// off from.
			m.mu.Unlock()
			if attempt == 3 {
				return nil, err
			}
			continue
		}
		m.next++
		ch := &muxChan{m: m, id: m.next, wake: make(chan struct{}, 1)}
		m.chans[ch.id] = ch
		m.mu.Unlock()
		context.AfterFunc(ctx, ch.detach)
		return ch, nil
	}
}

// sessionMux returns the working Sessions stream to addr, starting one if
// there is none (connecting within dialCtx).
func (c *Client) sessionMux(dialCtx context.Context, addr string) (*sessionMux, error) {
	c.mu.Lock()
	m := c.muxes[addr]
	c.mu.Unlock()
	if m != nil {
		return m, nil
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	gs, err := c.openSessions(ctx, dialCtx, addr)
	if err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	m = &sessionMux{c: c, addr: addr, gs: gs, cancel: cancel, wake: make(chan struct{}, 1), chans: make(map[uint64]*muxChan)}
	c.mu.Lock()
	if other := c.muxes[addr]; other != nil || c.closed {
		c.mu.Unlock()
		cancel()
		if other == nil {
			return nil, ErrClientClosed
		}
		return other, nil
	}
	c.muxes[addr] = m
	c.mu.Unlock()
	go m.reader()
	go m.sender()
	return m, nil
}

// openSessions opens a Sessions stream to addr that lasts until ctx ends:
// on Baton's framing when the member speaks it, else on gRPC.
func (c *Client) openSessions(ctx, dialCtx context.Context, addr string) (sessionsStream, error) {
	if c.useStreamConn(addr) {
		s, err := c.openStreamConn(ctx, dialCtx, addr)
		if !errors.Is(err, streamconn.ErrNotSpoken) {
			return s, err
		}
		c.log.Info("member does not speak Baton's session framing; using gRPC", "member", addr, "err", err)
	}
	bc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	// The stream's answers are decoded without protobuf's reflection.
	return bc.Sessions(ctx, grpc.ForceCodecV2(wire.Codec{}))
}

// reader delivers each response to its channel until the stream breaks.
func (m *sessionMux) reader() {
	for {
		msg, err := m.gs.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = &Error{Code: codes.Unavailable, Message: "the member ended the sessions stream"}
			}
			m.fail(fromStatus(err))
			return
		}
		// Responses first, ends after them: a handed-off channel's
		// responses are delivered before its end shows.
		var deliver []*muxChan
		type ending struct {
			ch  *muxChan
			err error
		}
		var ends []ending
		m.mu.Lock()
		for _, r := range msg.GetResponses() {
			ch := m.chans[r.GetChannel()]
			if ch == nil {
				continue // detached
			}
			if r.GetResponse() != nil {
				ch.q = append(ch.q, r.GetResponse())
				switch {
				case ch.handler == nil:
					poke(ch.wake)
				case !ch.marked:
					ch.marked = true
					deliver = append(deliver, ch)
				}
			}
			if e := r.GetEnd(); e != nil {
				delete(m.chans, ch.id)
				var err error = io.EOF
				if werr := fromWire(e.GetError()); werr != nil {
					err = werr
				}
				ends = append(ends, ending{ch, err})
			}
		}
		m.mu.Unlock()
		for _, ch := range deliver {
			ch.deliver()
		}
		if len(ends) > 0 {
			m.mu.Lock()
			for _, e := range ends {
				if e.ch.end == nil {
					e.ch.end = e.err
				}
				poke(e.ch.wake)
			}
			m.mu.Unlock()
		}
	}
}

// handOff makes the reader deliver the channel's responses to h, in
// order, starting with those already queued. Recv must not be used after
// it; waitEnd tells when the channel ended.
func (ch *muxChan) handOff(h func(*batonpb.SessionResponse)) {
	ch.dmu.Lock()
	defer ch.dmu.Unlock()
	ch.m.mu.Lock()
	ch.handler = h
	q := ch.q
	ch.q = nil
	ch.m.mu.Unlock()
	for _, r := range q {
		h(r)
	}
}

// deliver hands what is queued to the handler.
func (ch *muxChan) deliver() {
	ch.dmu.Lock()
	defer ch.dmu.Unlock()
	ch.m.mu.Lock()
	q, h := ch.q, ch.handler
	ch.q, ch.marked = nil, false
	ch.m.mu.Unlock()
	for _, r := range q {
		h(r)
	}
}

// waitEnd returns why a handed-off channel ended.
func (ch *muxChan) waitEnd() error {
	for {
		ch.m.mu.Lock()
		err := ch.end
		ch.m.mu.Unlock()
		if err != nil {
			return err
		}
		<-ch.wake
	}
}

// sender writes everything the channels queued since its last write as
// one message.
func (m *sessionMux) sender() {
	for {
		<-m.wake
		m.mu.Lock()
		q, broken := m.sendq, m.err != nil
		m.sendq = nil
		m.mu.Unlock()
		if broken {
			return
		}
		for _, part := range splitRequests(q, maxSendBytes) {
			if err := m.gs.Send(&batonpb.SessionsRequest{Requests: part}); err != nil {
				m.cancel() // the reader reports why
				break
			}
		}
	}
}

// maxSendBytes is about the most one Sessions message carries: a member
// refuses a message over its request limit (1 MiB) by ending the whole
// stream, which a client with thousands of sessions sending keepalives at
// once would otherwise reach.
const maxSendBytes = 256 << 10

// splitRequests cuts q into runs of at most max bytes (one request alone
// may exceed it), in order.
func splitRequests(q []*batonpb.ChannelRequest, max int) [][]*batonpb.ChannelRequest {
	var parts [][]*batonpb.ChannelRequest
	start, size := 0, 0
	for i, r := range q {
		n := protofield.SizeMessage(1, wire.ChannelRequestSize(r)) // as a repeated field
		if i > start && size+n > max {
			parts = append(parts, q[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(q) {
		parts = append(parts, q[start:])
	}
	return parts
}

// fail ends every channel with err and takes the stream off the client's
// list.
func (m *sessionMux) fail(err error) {
	m.mu.Lock()
	m.err = err
	for id, ch := range m.chans {
		if ch.end == nil {
			ch.end = err
		}
		poke(ch.wake)
		delete(m.chans, id)
	}
	m.sendq = nil
	m.mu.Unlock()
	poke(m.wake)
	m.cancel()
	m.c.mu.Lock()
	if m.c.muxes[m.addr] == m {
		delete(m.c.muxes, m.addr)
	}
	m.c.mu.Unlock()
}

// queueLocked queues r for the sender.
func (m *sessionMux) queueLocked(r *batonpb.ChannelRequest) {
	m.sendq = append(m.sendq, r)
	poke(m.wake)
}

// Send queues r; it never blocks. After the channel ended it returns the
// reason, as a gRPC stream's Send would.
func (ch *muxChan) Send(r *batonpb.SessionRequest) error {
	m := ch.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch.end != nil {
		return ch.end
	}
	m.queueLocked(&batonpb.ChannelRequest{Channel: ch.id, Request: r})
	return nil
}

// Recv returns the channel's next response, or why it ended (io.EOF:
// cleanly).
func (ch *muxChan) Recv() (*batonpb.SessionResponse, error) {
	m := ch.m
	for {
		m.mu.Lock()
		if len(ch.q) > 0 {
			r := ch.q[0]
			ch.q[0] = nil
			ch.q = ch.q[1:]
			m.mu.Unlock()
			return r, nil
		}
		if ch.end != nil {
			err := ch.end
			m.mu.Unlock()
			return nil, err
		}
		m.mu.Unlock()
		<-ch.wake
	}
}

// detach ends the channel from the client's side: the session lives on.
func (ch *muxChan) detach() {
	m := ch.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch.end == nil {
		ch.end = context.Canceled
		poke(ch.wake)
	}
	if m.chans[ch.id] == ch {
		delete(m.chans, ch.id)
		if m.err == nil {
			m.queueLocked(&batonpb.ChannelRequest{Channel: ch.id, Detach: true})
		}
	}
}
