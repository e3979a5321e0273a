package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

const (
	// QueueSize bounds the messages waiting for one peer. At 4096 it holds
	// several rounds of MaxInflightMsgs-limited MsgApp plus heartbeats; a
	// peer that cannot keep up loses messages instead of holding memory,
	// and Raft's flow control reacts to the ReportUnreachable.
	QueueSize = 4096

	// MaxEnvelopeBytes is the soft limit of one Envelope: a drained queue
	// is split into Envelopes of about this size so that one huge batch
	// does not hold up the stream. A larger single message (a snapshot)
	// goes alone.
	MaxEnvelopeBytes = 4 << 20

	// MaxMessageBytes is the largest frame sent or accepted; it bounds the
	// size of a MsgSnap.
	MaxMessageBytes = 512 << 20

	// MinBackoff and MaxBackoff bound the wait before reconnecting to a
	// peer: short enough to rejoin within an election timeout or two,
	// long enough not to spin on a dead address.
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = time.Second

	// connectTimeout bounds one connection attempt to a peer that does not
	// answer (a black-holed address), and the wait for a new connection's
	// preface and Hello.
	connectTimeout = 5 * time.Second

	// keepaliveIdle, keepaliveInterval and keepaliveCount are TCP
	// keepalives: they end an idle connection whose peer disappeared
	// without closing it (power loss, partition) in about 25 s.
	keepaliveIdle     = 10 * time.Second
	keepaliveInterval = 5 * time.Second
	keepaliveCount    = 3

	// userTimeout ends a connection whose sent data stays unacknowledged
	// that long (Linux TCP_USER_TIMEOUT), and writeTimeout a write that
	// cannot get into the socket: either way the peer is cut off, and the
	// sender reconnects instead of retransmitting into a partition with
	// ever longer backoffs.
	userTimeout  = 15 * time.Second
	writeTimeout = 15 * time.Second

	// StopFlushTimeout bounds how long Stop lets the senders write what is
	// queued on connections they have open: a stopping member's last
	// messages (the commit of its own removal, which the last other voter
	// may need to elect itself; a final vote or commit) leave with it,
	// and a peer that does not take them costs a stop this long at most.
	StopFlushTimeout = time.Second
)

// Config configures a Transport.
type Config struct {
	// Name is this member's name, sent in Hello.
	Name string
	// ID is this member's Raft id; messages with To == ID are dropped.
	ID uint64
	// PeerAddr is the address Start listens on, and is advertised in
	// Hello. StartListener does not need it.
	PeerAddr string
	// ClientAddr is the client API address advertised in Hello.
	ClientAddr string
	// LogVersion is the newest log version (fsm.LogVersion) this member
	// reads, advertised in Hello.
	LogVersion uint32
	// Peers maps the id of every other member to its name and peer
	// address.
	Peers map[uint64]Peer
	// Logger receives the transport's logs; nil discards them.
	Logger *slog.Logger
	// ClusterID, when set, returns the id of the cluster this member's log
	// belongs to (0: not known yet). It goes in every Hello, and a peer
	// whose Hello names another cluster is refused both ways: a member
	// bootstrapped apart (a newcomer started without --join, a data dir
	// of another cluster) never exchanges a message with this one.
	ClusterID func() uint64
	// OnRemoved, when set, is called (once per connection that hears it)
	// when a peer says this member was removed from the group.
	OnRemoved func()
	// TLS, when set, encrypts every peer connection both ways: inbound
	// connections are served with it (set ClientCAs and ClientAuth to
	// tls.RequireAndVerifyClientCert: a peer is known by its verified
	// certificate), outbound ones dial with it (RootCAs, and Certificates
	// for the other side's check); the server name is the peer address's
	// host unless set. A peer's certificate must name it (Peer.Name) as
	// its common name or a DNS name; see the package doc.
	TLS *tls.Config
	// Dial, when set, opens the connections to peers instead of TCP
	// (tests run members over connections in memory). The connect timeout
	// applies through ctx.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Peer is another member as the transport knows it.
type Peer struct {
	// Name is the member's name. With TLS, the certificate it shows must
	// name it (Config.TLS).
	Name string
	// Addr is its peer address.
	Addr string
}

// Validate reports whether cfg can be started. It does not modify cfg.
func (c *Config) Validate() error {
	if c.ID == 0 {
		return errors.New("transport: ID must not be 0")
	}
	for id, p := range c.Peers {
		switch {
		case id == 0:
			return errors.New("transport: peer ID must not be 0")
		case id == c.ID:
			return fmt.Errorf("transport: Peers contains this member's own ID %d", id)
		case p.Addr == "":
			return fmt.Errorf("transport: peer %d has no address", id)
		}
	}
	if c.TLS != nil && len(c.TLS.Certificates) > 0 {
		// The peers would refuse it; say so at start instead.
		names, err := ownNames(c.TLS.Certificates[0])
		if err != nil {
			return fmt.Errorf("transport: the TLS certificate: %w", err)
		}
		if !namesMember(names, c.Name) {
			return fmt.Errorf("transport: the TLS certificate names %q, not this member %q (its common name or a DNS name must be the member's name)", names, c.Name)
		}
	}
	return nil
}

// Handler receives what arrives from peers.
//
// Receive is called from the reading goroutine of each peer's connection,
// in order per peer, and never concurrently for the same peer; calls for
// different peers run concurrently. It must not block for long: a slow
// Receive stalls that peer's connection. The Handler owns m.
//
// ReportUnreachable is called from sender goroutines when a connection to
// id breaks, and synchronously from within Send when id's queue is full. It
// must not block and must not call back into the Transport.
type Handler interface {
	Receive(groupID uint64, m *raftpb.Message)
	ReportUnreachable(groupID uint64, id uint64)
}

// Transport sends and receives raftpb messages to and from a fixed set of
// peers. All methods are safe for concurrent use.
type Transport struct {
	cfg Config
	h   Handler
	log *slog.Logger
	lis net.Listener
	// peers is replaced whole by SetPeers (under peersMu) and read by Send
	// without a lock.
	peers   atomic.Pointer[map[uint64]*peer]
	peersMu sync.Mutex
	// removed are the ids whose removal this member applied (SetRemoved):
	// their connections are answered removedNotice and closed.
	removed atomic.Pointer[map[uint64]bool]

	// repeats rate-limits the lines a misconfigured peer repeats at every
	// reconnect.
	repeats repeats

	ctx    context.Context // cancelled by Stop; ends senders and their connections
	cancel context.CancelFunc
	// flush is closed when Stop begins: senders write what is queued on
	// the connection they have and return.
	flush chan struct{}
	wg    sync.WaitGroup
	stop  sync.Once

	mu      sync.Mutex
	stopped bool                  // Stop began: no new inbound connection
	conns   map[net.Conn]struct{} // open inbound connections
	info    map[uint64]peerInfo   // from Hellos
	inbound map[uint64]*inbound   // newest inbound connection per peer id
}

type peerInfo struct {
	name, clientAddr string
	logVersion       uint32 // 1 for a release before log versions
}

// Start listens on cfg.PeerAddr and starts the transport; see
// StartListener.
func Start(cfg Config, h Handler) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on peer address %s: %w", cfg.PeerAddr, err)
	}
	t, err := StartListener(l, cfg, h)
	if err != nil {
		l.Close()
		return nil, err
	}
	return t, nil
}

// StartListener accepts peers' connections on l and starts one sender
// goroutine per peer, which connects at once. The Transport owns l from
// then on, even if StartListener fails. Stop ends it all.
func StartListener(l net.Listener, cfg Config, h Handler) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		l.Close()
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = l.Addr().String()
	}
	cfg.Peers = maps.Clone(cfg.Peers) // our own copy

	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:     cfg,
		h:       h,
		log:     log.With("component", "transport", "node_id", fmt.Sprintf("%x", cfg.ID)),
		lis:     l,
		ctx:     ctx,
		cancel:  cancel,
		flush:   make(chan struct{}),
		conns:   make(map[net.Conn]struct{}),
		info:    make(map[uint64]peerInfo),
		inbound: make(map[uint64]*inbound),
	}
	ps := make(map[uint64]*peer, len(cfg.Peers))
	for id, p := range cfg.Peers {
		ps[id] = newPeer(ctx, id, p)
	}
	t.peers.Store(&ps)
	t.wg.Go(t.accept)
	for _, p := range ps {
		t.wg.Go(func() { p.run(t) })
	}
	t.log.Info("started", "addr", l.Addr().String(), "peers", len(ps))
	return t, nil
}

// Send queues msgs for their destinations and returns without blocking.
// Messages to this member or to unknown ids are dropped. When a peer's
// queue is full the message is dropped and ReportUnreachable(groupID, to)
// is called, once per peer per Send. Send does not modify msgs or the
// messages, and does not keep them after they are marshalled; the caller
// must not modify them meanwhile. After Stop, Send drops everything.
func (t *Transport) Send(groupID uint64, msgs []*raftpb.Message) {
	if t.ctx.Err() != nil {
		return
	}
	var full map[uint64]bool // peers with drops in this call
	peers := *t.peers.Load()
	for _, m := range msgs {
		to := m.GetTo()
		p := peers[to]
		if p == nil {
			if to != t.cfg.ID {
				t.log.Debug("dropped message to unknown peer", "peer", to, "type", m.GetType().String())
			}
			continue
		}
		if !p.enqueue(groupID, m) {
			if full == nil {
				full = make(map[uint64]bool)
			}
			full[to] = true
		}
	}
	for to := range full {
		t.log.Debug("queue full, dropped messages", "peer", to)
		t.h.ReportUnreachable(groupID, to)
	}
}

// SetPeers makes peers (id to name and peer address; this member's own id
// is ignored) the members messages go to, after a membership change: a
// new id gets a sender, a dropped one loses its sender and queue, a moved
// or renamed one is reconnected. Inbound connections already open are not
// affected.
func (t *Transport) SetPeers(peers map[uint64]Peer) {
	t.peersMu.Lock()
	defer t.peersMu.Unlock()
	if t.ctx.Err() != nil {
		return
	}
	old := *t.peers.Load()
	next := make(map[uint64]*peer, len(peers))
	var started []*peer
	for id, spec := range peers {
		if id == 0 || id == t.cfg.ID || spec.Addr == "" {
			continue
		}
		if p := old[id]; p != nil && p.addr == spec.Addr && p.name == spec.Name {
			next[id] = p
			continue
		}
		p := newPeer(t.ctx, id, spec)
		next[id] = p
		started = append(started, p)
	}
	for id, p := range old {
		if next[id] != p {
			p.cancel()
			t.log.Info("peer dropped", "peer", id, "addr", p.addr)
		}
	}
	t.peers.Store(&next)
	t.mu.Lock()
	stopped := t.stopped
	if !stopped {
		for _, p := range started {
			t.wg.Add(1) // under mu, before Stop's Wait can begin
			go func() {
				defer t.wg.Done()
				p.run(t)
			}()
		}
	}
	t.mu.Unlock()
	for _, p := range started {
		t.log.Info("peer added", "peer", p.id, "name", p.name, "addr", p.addr)
	}
}

// SetRemoved tells the transport the members removed from the group (by
// changes this member applied). A removed member that still sends is told
// so (Config.OnRemoved on its side) and its connection is closed. Only
// ids that can never be members again belong here: a member told so stops.
func (t *Transport) SetRemoved(ids []uint64) {
	m := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	t.removed.Store(&m)
}

// clusterID is Config.ClusterID's answer, 0 without one.
func (t *Transport) clusterID() uint64 {
	if t.cfg.ClusterID == nil {
		return 0
	}
	return t.cfg.ClusterID()
}

func (t *Transport) isRemoved(id uint64) bool {
	m := t.removed.Load()
	return m != nil && (*m)[id]
}

// PeerInfo returns the name and client address that peer id sent in the
// Hello of its latest inbound stream. ok is false until one has arrived.
func (t *Transport) PeerInfo(id uint64) (name, clientAddr string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pi, ok := t.info[id]
	return pi.name, pi.clientAddr, ok
}

// PeerLogVersion returns the newest log version peer id said it reads
// in the Hello of its latest inbound stream (1 if it is of a release
// before log versions). ok is false until one has arrived.
func (t *Transport) PeerLogVersion(id uint64) (v uint32, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pi, ok := t.info[id]
	return pi.logVersion, ok
}

// Addr returns the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.lis.Addr() }

// Stop closes the listener and every stream, and waits for all goroutines
// of the Transport. No Handler method is called after Stop returns. First
// each sender writes what is queued for its peer onto the connection it
// has open (or is opening), within StopFlushTimeout for all of them
// together; messages to a peer it is waiting to reconnect to, or left
// after that, are dropped. Stop may be called more than once.
func (t *Transport) Stop() {
	t.stop.Do(func() {
		close(t.flush)
		flushed, cancel := context.WithTimeout(context.Background(), StopFlushTimeout)
		for _, p := range *t.peers.Load() {
			select {
			case <-p.done:
			case <-flushed.Done(): // stays done for the peers after
			}
		}
		cancel()
		t.cancel()
		t.mu.Lock()
		t.stopped = true
		conns := make([]net.Conn, 0, len(t.conns))
		for c := range t.conns {
			conns = append(conns, c)
		}
		t.mu.Unlock()
		t.lis.Close()
		for _, c := range conns {
			c.Close()
		}
		t.wg.Wait()
		t.log.Info("stopped")
	})
}
