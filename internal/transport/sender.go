package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/internal/raftwire"
	"github.com/batonlock/baton/internal/transport/transportpb"
)

// peer is the sending side of one peer: a bounded queue and the goroutine
// (run) that drains it onto a TCP connection.
type peer struct {
	id   uint64
	name string
	addr string
	wake chan struct{} // capacity 1: "the queue is not empty"
	// ctx ends with the Transport, or when SetPeers drops the peer.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu     sync.Mutex
	queue  []queued
	spare  []queued            // the other buffer, swapped with queue by take
	groups map[uint64]struct{} // every group that sent to this peer
}

type queued struct {
	group uint64
	m     *raftpb.Message
}

func newPeer(parent context.Context, id uint64, spec Peer) *peer {
	ctx, cancel := context.WithCancel(parent)
	return &peer{
		id:     id,
		name:   spec.Name,
		addr:   spec.Addr,
		wake:   make(chan struct{}, 1),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		groups: make(map[uint64]struct{}),
	}
}

// enqueue appends m to the queue, or reports false when it is full.
func (p *peer) enqueue(group uint64, m *raftpb.Message) bool {
	p.mu.Lock()
	if _, ok := p.groups[group]; !ok {
		p.groups[group] = struct{}{}
	}
	if len(p.queue) >= QueueSize {
		p.mu.Unlock()
		return false
	}
	p.queue = append(p.queue, queued{group, m})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns everything queued and empties the queue. The returned slice
// is valid until the next take.
func (p *peer) take() []queued {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	clear(p.spare) // drop references to sent messages
	p.queue, p.spare = p.spare[:0], q
	return q
}

// fail drops the queue and returns the groups to report unreachable.
func (p *peer) fail() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.queue)
	p.queue = p.queue[:0]
	groups := make([]uint64, 0, len(p.groups))
	for g := range p.groups {
		groups = append(groups, g)
	}
	return groups
}

// run keeps a connection to the peer open and writes the queue onto it
// until Stop.
func (p *peer) run(t *Transport) {
	defer close(p.done)
	log := t.log.With("peer", p.id)
	backoff := MinBackoff
	for {
		sent, err := p.stream(t)
		if p.ctx.Err() != nil || errors.Is(err, errStopping) {
			return
		}
		if errors.Is(err, errWrongPeer) {
			t.repeats.log(log, slog.LevelWarn, "wrong-peer/"+p.addr, "refused to send to a peer whose certificate does not name it", "err", err)
		}
		if errors.Is(err, errForeign) {
			t.repeats.log(log, slog.LevelError, "foreign-out/"+p.addr, "peer refused this member: it belongs to another cluster. "+foreignCause, "addr", p.addr)
			sent = false // nothing to hurry back for: it refuses again until someone acts
		}
		if errors.Is(err, errRemovedByPeer) {
			log.Warn("peer says this member was removed from the cluster", "addr", p.addr)
			if t.cfg.OnRemoved != nil {
				t.cfg.OnRemoved()
			}
		}
		if sent {
			backoff = MinBackoff
		}
		// Warn once per connection that worked; retries of a peer that
		// stays down are Debug.
		if sent {
			log.Warn("lost peer connection, reconnecting", "addr", p.addr, "err", err)
		} else {
			log.Debug("cannot reach peer", "addr", p.addr, "err", err)
		}
		for _, g := range p.fail() {
			t.h.ReportUnreachable(g, p.id)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-t.flush: // nothing to write it on
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// errStopping ends a stream whose queue Stop had it write out.
var errStopping = errors.New("transport stopping")

// stream opens one connection, sends the preface and Hello and then
// batches until an error or Stop. sent reports whether any batch got onto
// the connection. Each wake-up drains the whole queue into one buffered
// write: messages produced while the previous batch was on the wire leave
// together. When Stop begins it writes what is queued and returns
// errStopping.
func (p *peer) stream(t *Transport) (sent bool, err error) {
	c, err := t.dial(p.ctx, p.addr)
	if err != nil {
		return false, err
	}
	setUserTimeout(c, t.log)
	if t.cfg.TLS != nil {
		if c, err = clientTLS(p.ctx, c, t.cfg.TLS, p.addr, p.name); err != nil {
			return false, err
		}
	}
	// The peer never writes: a pending Read is how we learn that the
	// connection ended while idle, and why. It returns once c is closed at
	// the latest.
	ended := make(chan struct{})
	var endErr error
	go func() {
		defer close(ended)
		b := make([]byte, len(removedNotice))
		n, err := io.ReadFull(c, b)
		switch {
		case string(b[:n]) == removedNotice:
			err = errRemovedByPeer
		case string(b[:n]) == foreignNotice:
			err = errForeign
		case n > 0:
			err = errors.New("peer wrote on a send-only connection")
		case errors.Is(err, io.EOF):
			err = errors.New("connection closed by peer")
		}
		endErr = err
	}()
	stop := context.AfterFunc(p.ctx, func() { c.Close() })
	defer func() {
		stop()
		c.Close()
		<-ended
	}()
	// writeErr prefers why the connection ended to the write's own error.
	writeErr := func(err error) error {
		select {
		case <-ended:
			return endErr
		default:
			return err
		}
	}

	w := bufio.NewWriterSize(c, 64<<10)
	hello, err := proto.Marshal(&transportpb.Envelope{Hello: &transportpb.Hello{
		Name:       t.cfg.Name,
		Id:         t.cfg.ID,
		ClientAddr: t.cfg.ClientAddr,
		PeerAddr:   t.cfg.PeerAddr,
		ClusterId:  t.clusterID(),
		LogVersion: t.cfg.LogVersion,
	}})
	if err != nil {
		return false, err
	}
	buf := append([]byte(preface), binary.BigEndian.AppendUint32(nil, uint32(len(hello)))...)
	buf = append(buf, hello...)
	if err := flushTo(c, w, buf); err != nil {
		return false, writeErr(err)
	}
	for {
		stopping := false
		select {
		case <-p.ctx.Done():
			return sent, p.ctx.Err()
		case <-ended:
			return sent, endErr
		case <-p.wake:
		case <-t.flush:
			stopping = true
		}
		q := p.take()
		buf = buf[:0]
		for len(q) > 0 {
			var err error
			buf, q, err = appendFrame(buf, q)
			if err != nil {
				// A message that cannot be marshalled is a bug upstream;
				// drop it rather than the connection.
				t.log.Error("cannot marshal raft message", "peer", p.id, "err", err)
			}
			// Write out every MaxEnvelopeBytes or so: a long queue (a
			// follower catching up) must not become one buffer the size
			// of all of it (found by TestScale: the leader's memory).
			if len(buf) >= MaxEnvelopeBytes || len(q) == 0 && len(buf) > 0 {
				if err := flushTo(c, w, buf); err != nil {
					return sent, writeErr(err)
				}
				sent = true
				buf = buf[:0]
			}
		}
		if stopping {
			return sent, errStopping
		}
		if cap(buf) > 2*MaxEnvelopeBytes {
			buf = nil // do not keep a snapshot's buffer
		}
	}
}

// errRemovedByPeer: the peer answered removedNotice.
var errRemovedByPeer = errors.New("peer says this member was removed from the cluster")

// dial connects to a peer's addr within connectTimeout: over TCP, or
// through Config.Dial.
func (t *Transport) dial(ctx context.Context, addr string) (net.Conn, error) {
	if t.cfg.Dial == nil {
		d := net.Dialer{Timeout: connectTimeout, KeepAliveConfig: keepAliveConfig}
		return d.DialContext(ctx, "tcp", addr)
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return t.cfg.Dial(ctx, addr)
}

// clientTLS runs the TLS handshake of an outbound connection to the
// member called name, within connectTimeout, and checks that the
// certificate the other side showed names that member: hostname
// verification alone (the server name is the address's host unless set)
// would take any member's certificate for a shared host or IP. c is
// closed if either fails.
func clientTLS(ctx context.Context, c net.Conn, cfg *tls.Config, addr, name string) (net.Conn, error) {
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(c, cfg)
	hctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	if names := certNames(tc.ConnectionState()); !namesMember(names, name) {
		c.Close()
		return nil, fmt.Errorf("%w: dialled %q at %s, its certificate names %q", errWrongPeer, name, addr, names)
	}
	return tc, nil
}

// flushTo writes b through w, within a deadline that grows with its size.
func flushTo(c net.Conn, w *bufio.Writer, b []byte) error {
	if err := c.SetWriteDeadline(time.Now().Add(writeTimeout + time.Duration(len(b)>>20)*time.Second)); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// appendFrame appends to dst one frame holding an Envelope for a prefix of
// q that has one group and about MaxEnvelopeBytes at most, and returns the
// rest of q. The Envelope is encoded in place: each message is marshalled
// once, straight into dst. On error the frame is dropped and q advances
// past the message that failed.
func appendFrame(dst []byte, q []queued) ([]byte, []queued, error) {
	group := q[0].group
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // the frame's length, set below
	// The Envelope: its group_id, then each message as one of messages.
	dst = protofield.AppendPresentUint(dst, 2, group)
	opts := proto.MarshalOptions{UseCachedSize: true}
	n, size := 0, 0
	for n < len(q) && q[n].group == group {
		m := q[n].m
		sz, fast := raftwire.MessageSize(m)
		if !fast {
			sz = proto.Size(m)
		}
		if n > 0 && size+sz > MaxEnvelopeBytes {
			break
		}
		dst = protofield.AppendMessageHeader(dst, 3, sz)
		if fast {
			dst = raftwire.AppendMessage(dst, m)
		} else {
			var err error
			if dst, err = opts.MarshalAppend(dst, m); err != nil {
				return dst[:start], q[n+1:], fmt.Errorf("message %s to %d: %w", m.GetType(), m.GetTo(), err)
			}
		}
		size += sz
		n++
	}
	if len(dst)-start-4 > MaxMessageBytes {
		return dst[:start], q[n:], fmt.Errorf("a frame of %d bytes (%d messages) is over the limit of %d", len(dst)-start-4, n, MaxMessageBytes)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, q[n:], nil
}
