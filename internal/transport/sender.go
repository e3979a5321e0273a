package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/transport/transportpb"
)

// peer is the sending side of one peer: a bounded queue and the goroutine
// (run) that drains it onto a client stream.
type peer struct {
	id     uint64
	addr   string
	conn   *grpc.ClientConn
	client transportpb.PeerClient
	wake   chan struct{} // capacity 1: "the queue is not empty"

	mu     sync.Mutex
	queue  []queued
	spare  []queued            // the other buffer, swapped with queue by take
	groups map[uint64]struct{} // every group that sent to this peer
}

type queued struct {
	group uint64
	m     *raftpb.Message
}

func (t *Transport) newPeer(id uint64, addr string) (*peer, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
		),
		// gRPC's own reconnect backoff (default up to 120 s) would outlast
		// ours; keep it within MinBackoff..MaxBackoff too.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: MinBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxBackoff,
			},
			MinConnectTimeout: connectTimeout,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("peer %d at %s: %w", id, addr, err)
	}
	return &peer{
		id:     id,
		addr:   addr,
		conn:   conn,
		client: transportpb.NewPeerClient(conn),
		wake:   make(chan struct{}, 1),
		groups: make(map[uint64]struct{}),
	}, nil
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

// run keeps a stream to the peer open and writes the queue onto it until
// Stop. It owns p.conn.
func (p *peer) run(t *Transport) {
	defer p.conn.Close()
	log := t.log.With("peer", p.id)
	backoff := MinBackoff
	for {
		sent, err := p.stream(t)
		if t.ctx.Err() != nil {
			return
		}
		if sent {
			backoff = MinBackoff
		}
		// Warn once per stream that worked; retries of a peer that stays
		// down are Debug.
		if sent {
			log.Warn("lost peer stream, reconnecting", "addr", p.addr, "err", err)
		} else {
			log.Debug("cannot reach peer", "addr", p.addr, "err", err)
		}
		for _, g := range p.fail() {
			t.h.ReportUnreachable(g, p.id)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// stream opens one stream, says Hello and then sends batches until an
// error or Stop. sent reports whether any batch got onto the stream.
func (p *peer) stream(t *Transport) (sent bool, err error) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	s, err := p.client.Stream(ctx)
	if err != nil {
		return false, err
	}
	// The peer never answers before the stream ends, so a pending RecvMsg
	// is how we learn that the stream broke while idle, and why. It
	// returns once cancel is called at the latest.
	ended := make(chan struct{})
	var endErr error
	go func() {
		defer close(ended)
		endErr = s.RecvMsg(new(transportpb.StreamSummary))
		if endErr == nil {
			endErr = errors.New("stream closed by peer")
		}
	}()
	defer func() {
		cancel()
		<-ended
	}()
	// sendErr turns the io.EOF that Send returns on a broken stream into
	// the stream's status.
	sendErr := func(err error) error {
		if errors.Is(err, io.EOF) {
			<-ended
			return endErr
		}
		return err
	}

	hello := &transportpb.Envelope{Hello: &transportpb.Hello{
		Name:       t.cfg.Name,
		Id:         t.cfg.ID,
		ClientAddr: t.cfg.ClientAddr,
		PeerAddr:   t.cfg.PeerAddr,
	}}
	if err := s.Send(hello); err != nil {
		return false, sendErr(err)
	}
	for {
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case <-ended:
			return sent, endErr
		case <-p.wake:
		}
		q := p.take()
		for len(q) > 0 {
			var env *transportpb.Envelope
			var err error
			env, q, err = nextEnvelope(q)
			if err != nil {
				// A message that cannot be marshalled is a bug upstream;
				// drop it rather than the stream.
				t.log.Error("cannot marshal raft message", "peer", p.id, "err", err)
				continue
			}
			if err := s.Send(env); err != nil {
				return sent, sendErr(err)
			}
			sent = true
		}
	}
}

// nextEnvelope returns an Envelope holding a prefix of q that has one group
// and about MaxEnvelopeBytes at most, and the rest of q. The messages are
// marshalled into one new buffer, and the Envelope is new, because gRPC may
// read it after Send returns.
func nextEnvelope(q []queued) (*transportpb.Envelope, []queued, error) {
	group := q[0].group
	n, size := 0, 0
	for n < len(q) && q[n].group == group {
		sz := proto.Size(q[n].m)
		if n > 0 && size+sz > MaxEnvelopeBytes {
			break
		}
		size += sz
		n++
	}
	buf := make([]byte, 0, size)
	msgs := make([][]byte, 0, n)
	opts := proto.MarshalOptions{UseCachedSize: true}
	for _, e := range q[:n] {
		start := len(buf)
		var err error
		buf, err = opts.MarshalAppend(buf, e.m)
		if err != nil {
			return nil, q[n:], fmt.Errorf("message %s to %d: %w", e.m.GetType(), e.m.GetTo(), err)
		}
		msgs = append(msgs, buf[start:len(buf):len(buf)])
	}
	return &transportpb.Envelope{GroupId: group, Messages: msgs}, q[n:], nil
}
