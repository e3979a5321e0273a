// Package embed starts a real Baton member inside a Go process: durable
// storage, Raft, peer transport and the client API, exactly as
// `baton server` runs them. Use it to run a single node in a temporary
// directory from a test, or to embed a member in a program, as etcd's
// embed package does:
//
//	cfg := embed.DefaultConfig()
//	cfg.DataDir = t.TempDir()
//	cfg.ClientAddr = "127.0.0.1:0"
//	cfg.PeerAddr = "127.0.0.1:0"
//	m, err := embed.Start(cfg)
//	...
//	defer m.Close()
//	client, err := baton.Dial(ctx, m.ClientAddr())
package embed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/dashboard"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/raftnode"
	"github.com/batonlock/baton/internal/server"
	"github.com/batonlock/baton/internal/storage"
	"github.com/batonlock/baton/internal/transport"
)

// Version is reported by Status.
const Version = "0.1.0"

// GroupID is the Raft group every member runs today. The storage layout
// (DataDir/group-1) and the transport already carry it, so the lock
// namespace can later be split over many groups.
const GroupID = 1

// Config configures one member.
type Config struct {
	// Name is this member's name, unique in the cluster.
	Name string
	// DataDir holds the member's log and snapshots.
	DataDir string
	// ClientAddr serves the API (gRPC and HTTP/JSON); PeerAddr serves
	// Raft traffic. Port 0 picks a free port (see Member.ClientAddr).
	ClientAddr string
	PeerAddr   string
	// AdvertiseClientAddr is the client address this member tells the
	// other members, and through them clients (Status, leader hints), as
	// host:port; empty: the address the client API is bound to. Set it
	// when that is no address to dial: bound to 0.0.0.0 or [::], or
	// behind NAT.
	AdvertiseClientAddr string
	// InitialCluster lists every member as name=peerAddr, comma-separated.
	// Empty means a single-member cluster of this member alone. Once the
	// cluster runs, membership changes (AddMember, RemoveMember) are the
	// truth and are kept in the log and snapshots; the list still supplies
	// the addresses of first members the log never recorded (clusters
	// bootstrapped by releases before membership changes).
	InitialCluster string
	// Join starts a member added to a running cluster by AddMember: with
	// an empty data dir it waits for the leader to send it the log instead
	// of bootstrapping a cluster of InitialCluster (which must list the
	// running members and this one: AddMember's initial_cluster). Ignored
	// once the data dir holds a log. A member added but started without
	// Join bootstraps a cluster of its own, with another cluster id, and
	// the members refuse it (transport.Config.ClusterID).
	Join bool
	// TickInterval and ElectionTicks set Raft's timing.
	TickInterval  time.Duration
	ElectionTicks int
	// SnapshotEntries is how many entries trigger a snapshot.
	SnapshotEntries uint64
	// ClientListener and PeerListener, when set, are used instead of
	// listening on ClientAddr and PeerAddr (tests bind port 0 first so a
	// cluster's addresses are known before its members start).
	ClientListener net.Listener
	PeerListener   net.Listener
	// PeerDial, when set, opens the connections to other members instead
	// of TCP (with PeerListener, tests run members over connections in
	// memory: embedtest.InMemory).
	PeerDial func(ctx context.Context, addr string) (net.Conn, error)
	// HTTPHandler, when set, also serves every path outside /v1/,
	// /metrics (the member's metrics), /healthz and /readyz (health
	// probes) and /ui/ (the web dashboard, to which / redirects when
	// HTTPHandler is nil).
	HTTPHandler http.Handler
	Logger      *slog.Logger
	// ClientTLS, when set, serves the client port (gRPC, HTTP/JSON, the
	// dashboard, metrics) over TLS only; set ClientCAs and ClientAuth to
	// tls.RequireAndVerifyClientCert to admit only clients with a
	// certificate of that CA. Unless NextProtos says otherwise, ALPN
	// prefers "http/1.1" and offers "h2": browsers and curl speak
	// HTTP/1.1, gRPC clients (which offer only h2) HTTP/2.
	ClientTLS *tls.Config
	// PeerTLS, when set, encrypts Raft traffic between members both ways
	// (see transport.Config.TLS): every member needs it, with a
	// certificate the others' RootCAs and ClientCAs trust and that names
	// the member (Name) as its common name or a DNS name; members refuse
	// a certificate that does not name the member it speaks for.
	PeerTLS *tls.Config
	// Operators, when not empty, restricts operator calls (Blacklist,
	// CasRelease, AddMember, PromoteMember, RemoveMember, over gRPC and
	// HTTP) to clients whose verified certificate has one of these subject
	// common names; others get PERMISSION_DENIED. It needs ClientTLS with
	// ClientAuth tls.RequireAndVerifyClientCert. Empty: any client the
	// port admits may make them.
	Operators []string
	// LockDelay is the lock-delay this member, while it leads, gives the
	// hold of an acquire that states none, and LockDelayByPrefix the one
	// for lock names starting with a prefix (the longest prefix wins):
	// when such a hold ends by its session's expiry or its hold limit,
	// the lock is granted to no one that long, so that its holder's last
	// writes drain. 0 s .. 60 s in whole seconds; zero: none (the
	// default). Applied from log version 5 (every member of this release
	// or newer).
	LockDelay         time.Duration
	LockDelayByPrefix map[string]time.Duration
	// SignedTokens: this member signs every grant it answers with the
	// cluster's current signing key (fence.SignToken; the public keys are
	// served at GET /v1/keys), and, leading a cluster without one,
	// proposes the first. It needs log version 6 (every member of this
	// release or newer). Start every member alike: one without it signs
	// nothing while it leads.
	SignedTokens bool
	// LogVersion is the newest log version this member says it reads
	// (0: this release's, fsm.LogVersion). Tests of clusters of mixed
	// releases set an older one; nothing else should.
	LogVersion uint32

	// Limits on what clients may take of this member (limits.go); each
	// must be positive. A refusal names the limit and its flag.

	// MaxClientConns bounds the connections open on the client port: one
	// more is closed as soon as it is accepted. DefaultConfig derives it
	// from the process's open file limit (DefaultMaxClientConns) so that
	// the log, snapshots and peers always have descriptors left.
	MaxClientConns int
	// ConnHandshakeTimeout bounds the time a new client connection has to
	// show whether it speaks gRPC or HTTP/1 (its TLS handshake included;
	// a gRPC client shows it with its first call), and an HTTP request to
	// send its header; the member closes it then.
	ConnHandshakeTimeout time.Duration
	// ConnIdleTimeout closes an HTTP/1 keep-alive connection idle between
	// requests, and a gRPC connection without a call, for that long.
	ConnIdleTimeout time.Duration
	// MaxSessions bounds the cluster's live sessions, as its leader
	// counts them: an open over it gets RESOURCE_EXHAUSTED with Reason
	// TOO_MANY_SESSIONS and opens nothing. Resuming a session, or
	// retrying an open that made a live one, is never refused.
	MaxSessions int
	// MaxSessionsPerUser bounds, with authentication on, the live
	// sessions one user opened, counted as MaxSessions is: an open over
	// it gets RESOURCE_EXHAUSTED with Reason TOO_MANY_SESSIONS. Sessions
	// opened while authentication is off are no user's. 0: no bound.
	MaxSessionsPerUser int
	// MaxKeepAliveRate bounds one session's keepalives (resumes
	// included) a second, with as many at once: one over it gets
	// RESOURCE_EXHAUSTED (Reason OVERLOADED, which the Go client backs
	// off from) without costing the leader a ReadIndex round.
	MaxKeepAliveRate int
	// MinFreeDisk is the free space, in bytes, the member keeps in
	// DataDir's file system for what it already holds: below it, while it
	// leads, it refuses new sessions and acquires with RESOURCE_EXHAUSTED
	// (Reason NO_SPACE) and serves everything else, until space is freed.
	// 0 turns the guard off; MinFreeDiskAuto (DefaultConfig's) is
	// DefaultMinFreeDisk of the file system (disk.go). A disk that fills
	// all the same stops the member at its next log write, having lost
	// nothing it acknowledged.
	MinFreeDisk int64
	// DiskSpace, when set, reports DataDir's free space instead of the
	// member's own measure (statfs once every DiskPollInterval; none where
	// the platform has no statfs, and then the guard is off). Tests set it
	// to play a nearly full disk.
	DiskSpace DiskSpace

	// MetricsPrefixDepth is how many '/'-separated segments of a lock's
	// name label its metrics on /metrics: 1 (DefaultConfig's) counts
	// "jobs/42" under "jobs/"; 0 labels none. The first 100 prefixes a
	// member meets have series of their own, the others count under
	// "other", so the number of series stays bounded whatever the names.
	MetricsPrefixDepth int
}

// DefaultConfig is the embedded single-node default: member "default",
// data in ./baton-data, client API on 127.0.0.1:7700, peers on :7701.
func DefaultConfig() Config {
	rc := raftnode.DefaultConfig()
	maxConns := MaxClientConnsCeiling
	if nofile, ok := openFileLimit(); ok {
		maxConns = DefaultMaxClientConns(nofile)
	}
	return Config{
		Name:                 "default",
		DataDir:              "baton-data",
		ClientAddr:           "127.0.0.1:7700",
		PeerAddr:             "127.0.0.1:7701",
		TickInterval:         rc.TickInterval,
		ElectionTicks:        rc.ElectionTicks,
		SnapshotEntries:      rc.SnapshotEntries,
		MaxClientConns:       maxConns,
		ConnHandshakeTimeout: DefaultConnHandshakeTimeout,
		ConnIdleTimeout:      DefaultConnIdleTimeout,
		MaxSessions:          DefaultMaxSessions,
		MaxSessionsPerUser:   DefaultMaxSessionsPerUser,
		MaxKeepAliveRate:     DefaultMaxKeepAliveRate,
		MinFreeDisk:          MinFreeDiskAuto,
		MetricsPrefixDepth:   DefaultMetricsPrefixDepth,
	}
}

// DefaultMetricsPrefixDepth labels lock metrics by the first segment of
// a lock's name: a namespace per application is the common use of '/'.
const DefaultMetricsPrefixDepth = 1

// PeerSpec is one entry of InitialCluster.
type PeerSpec struct {
	Name     string
	ID       uint64
	PeerAddr string
}

// ParseCluster parses name=addr,name=addr. IDs derive from names (FNV-64a),
// so every member computes the same ids from the same list.
func ParseCluster(s string) ([]PeerSpec, error) {
	var out []PeerSpec
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("initial cluster entry %q: want name=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("initial cluster entry %q: %w", part, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("initial cluster names %q twice", name)
		}
		seen[name] = true
		out = append(out, PeerSpec{Name: name, ID: MemberID(name), PeerAddr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("initial cluster is empty")
	}
	return out, nil
}

// clusterID identifies a cluster bootstrapped with peers: a hash of their
// names and addresses, in name order.
func clusterID(peers []PeerSpec) uint64 {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.Name + "=" + p.PeerAddr
	}
	slices.Sort(parts)
	h := fnv.New64a()
	h.Write([]byte("baton-cluster\x00" + strings.Join(parts, ",")))
	return max(h.Sum64(), 1)
}

// MemberID is the Raft id of the member called name.
func MemberID(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}

// Validate reports the first invalid field; it does not change c.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("name is required")
	case c.DataDir == "":
		return errors.New("data dir is required")
	case c.TickInterval <= 0:
		return errors.New("tick interval must be positive")
	case c.ElectionTicks < 2:
		return errors.New("election ticks must be at least 2")
	case c.SnapshotEntries == 0:
		return errors.New("snapshot entries must be positive")
	case c.MaxClientConns < 1:
		return errors.New("max client conns must be positive")
	case c.ConnHandshakeTimeout <= 0:
		return errors.New("conn handshake timeout must be positive")
	case c.ConnIdleTimeout <= 0:
		return errors.New("conn idle timeout must be positive")
	case c.MaxSessions < 1:
		return errors.New("max sessions must be positive")
	case c.MaxSessionsPerUser < 0:
		return errors.New("max sessions per user must not be negative (0: no bound)")
	case c.MaxKeepAliveRate < 1:
		return errors.New("max keepalive rate must be positive")
	case c.MinFreeDisk < MinFreeDiskAuto:
		return errors.New("min free disk must be a number of bytes, 0 (no guard) or MinFreeDiskAuto")
	case c.MetricsPrefixDepth < 0:
		return errors.New("metrics prefix depth must not be negative (0: no prefix label)")
	}
	if err := (server.LockDelays{Default: c.LockDelay, ByPrefix: c.LockDelayByPrefix}).Validate(); err != nil {
		return err
	}
	if len(c.Operators) > 0 {
		if c.ClientTLS == nil || c.ClientTLS.ClientAuth != tls.RequireAndVerifyClientCert {
			return errors.New("operators need client certificates: TLS on the client port with client certificates required and verified")
		}
		for _, o := range c.Operators {
			if strings.TrimSpace(o) == "" {
				return errors.New("an operator name is empty")
			}
		}
	}
	for _, a := range []struct{ flag, v string }{{"client address", c.ClientAddr}, {"peer address", c.PeerAddr}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return fmt.Errorf("%s %q: %w", a.flag, a.v, err)
		}
	}
	if c.AdvertiseClientAddr != "" {
		if err := rules.CheckClientAddr(c.AdvertiseClientAddr); err != nil {
			return fmt.Errorf("advertised %w", err)
		}
	}
	if c.InitialCluster != "" {
		peers, err := ParseCluster(c.InitialCluster)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(peers, func(p PeerSpec) bool { return p.Name == c.Name }) {
			return fmt.Errorf("initial cluster %q does not name this member %q", c.InitialCluster, c.Name)
		}
		if n := len(peers); !c.Join && n != 1 && n != 3 && n != 5 {
			return fmt.Errorf("initial cluster has %d members; a new cluster starts with 1, 3 or 5 (a member added by AddMember starts with Join: baton server --join)", n)
		}
	}
	return nil
}

// Member is a running member.
type Member struct {
	cfg     Config
	log     *slog.Logger
	store   *storage.Store
	tr      *transport.Transport
	node    *raftnode.Node
	srv     *server.Server
	api     *server.Listener
	clientL net.Listener
	peers   []PeerSpec // from InitialCluster
	// membership is the latest the node published (raftnode.Membership).
	membership atomic.Pointer[raftnode.Membership]
	// bootClusterID is the id of the cluster this member bootstraps (an
	// empty data dir without Join), until the node publishes it.
	bootClusterID uint64
	stopTrack     context.CancelFunc
	trackDone     chan struct{}
	keysDone      chan struct{} // KeepSigningKey's end; it stops with stopTrack
	closeOnce     sync.Once

	// disk measures the data dir's free space, unless Config.DiskSpace
	// does.
	disk *diskPoller
}

// Start opens the data dir, joins (or bootstraps) the cluster and serves.
func Start(cfg Config) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("member", cfg.Name)
	peers := []PeerSpec{{Name: cfg.Name, ID: MemberID(cfg.Name), PeerAddr: cfg.PeerAddr}}
	if cfg.InitialCluster != "" {
		peers, _ = ParseCluster(cfg.InitialCluster)
	}
	self := MemberID(cfg.Name)
	m := &Member{cfg: cfg, log: lg, peers: peers}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()

	dir := filepath.Join(cfg.DataDir, fmt.Sprintf("group-%d", GroupID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embed: data dir: %w", err)
	}
	st, err := storage.Open(dir, lg)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	m.store = st
	snap, hs, ents := st.State()
	if !cfg.Join && snap == nil && (hs == nil || raft.IsEmptyHardState(hs)) && len(ents) == 0 {
		// Bootstrapping: the cluster's id is known before any peer
		// connects (a member of another cluster is refused from the
		// first Hello on).
		m.bootClusterID = clusterID(peers)
	}

	clientL := cfg.ClientListener
	if clientL == nil {
		if clientL, err = net.Listen("tcp", cfg.ClientAddr); err != nil {
			return nil, fmt.Errorf("embed: client address: %w", err)
		}
	}
	if cfg.ClientTLS != nil {
		tc := cfg.ClientTLS.Clone()
		if len(tc.NextProtos) == 0 {
			// The port tells gRPC from HTTP by what a connection sends
			// first (cmux); an HTTP/2 connection that is not gRPC would
			// not be served, so only gRPC gets h2.
			tc.NextProtos = []string{"http/1.1", "h2"}
		}
		clientL = tls.NewListener(clientL, tc)
	}
	m.clientL = clientL

	peerMap := map[uint64]transport.Peer{}
	var voters []uint64
	for _, p := range peers {
		voters = append(voters, p.ID)
		if p.ID != self {
			peerMap[p.ID] = transport.Peer{Name: p.Name, Addr: p.PeerAddr}
		}
	}
	h := &handler{}
	tracker := liveness.New(expirer{node: &h.node, log: lg.With("component", "liveness")}, lg)
	fan := &fanout{tracker: tracker}
	tcfg := transport.Config{
		Name: cfg.Name, ID: self, PeerAddr: cfg.PeerAddr, ClientAddr: m.advertisedClientAddr(),
		Peers: peerMap, Logger: lg, TLS: cfg.PeerTLS, Dial: cfg.PeerDial, LogVersion: m.readsLogVersion(),
		ClusterID: func() uint64 {
			if ms := m.membership.Load(); ms != nil && ms.ClusterID != 0 {
				return ms.ClusterID
			}
			return m.bootClusterID
		},
		OnRemoved: func() {
			if n := h.node.Load(); n != nil {
				n.StopRemoved()
			}
		},
	}
	var tr *transport.Transport
	if cfg.PeerListener != nil {
		tr, err = transport.StartListener(cfg.PeerListener, tcfg, h)
	} else {
		tr, err = transport.Start(tcfg, h)
	}
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	m.tr = tr

	rc := raftnode.DefaultConfig()
	rc.ID = self
	rc.GroupID = GroupID
	rc.Peers = voters
	rc.PeerContexts = make(map[uint64][]byte, len(peers))
	cid := clusterID(peers)
	for _, p := range peers {
		rc.PeerContexts[p.ID] = raftnode.MemberContext(p.Name, p.PeerAddr, cid)
	}
	rc.Join = cfg.Join
	rc.LogVersion = m.readsLogVersion()
	rc.LogVersionDue = m.logVersionDue
	rc.MembershipChanged = m.membershipChanged
	rc.Store = st
	rc.Recovered = raftnode.Recovered{Snapshot: snap, HardState: hs, Entries: ents}
	rc.Transport = tr
	rc.Observer = fan
	rc.TickInterval = cfg.TickInterval
	rc.ElectionTicks = cfg.ElectionTicks
	rc.SnapshotEntries = cfg.SnapshotEntries
	rc.Logger = lg
	node, err := raftnode.Start(rc)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	m.node = node
	h.node.Store(node)

	ctx, cancel := context.WithCancel(context.Background())
	m.stopTrack = cancel
	m.trackDone = make(chan struct{})
	go func() {
		defer close(m.trackDone)
		tracker.Run(ctx)
	}()

	var guard server.DiskGuard
	guard, m.disk = cfg.diskGuard(dir, statDisk, lg)
	m.srv = server.New(server.Config{Name: cfg.Name, Version: Version, Node: node, Liveness: tracker,
		Members: m.members, MemberID: MemberID, Operators: cfg.Operators, Limits: cfg.limits(), Disk: guard, MetricsPrefixDepth: cfg.MetricsPrefixDepth, Logger: lg,
		LockDelays: server.LockDelays{Default: cfg.LockDelay, ByPrefix: cfg.LockDelayByPrefix}, SignedTokens: cfg.SignedTokens})
	fan.api.Store(m.srv)
	m.keysDone = make(chan struct{})
	go func() {
		defer close(m.keysDone)
		m.srv.KeepSigningKey(ctx)
	}()

	extra := http.NewServeMux()
	extra.Handle("/metrics", m.srv.MetricsHandler())
	extra.Handle("/healthz", m.srv.HealthzHandler())
	extra.Handle("/readyz", m.srv.ReadyzHandler())
	ui := dashboard.Handler()
	extra.Handle(dashboard.Prefix, ui)
	if cfg.HTTPHandler != nil {
		extra.Handle("/", cfg.HTTPHandler)
	} else {
		extra.Handle("/{$}", ui) // / redirects to the dashboard
	}
	api, err := server.Serve(clientL, m.srv, extra)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	m.api = api
	ok = true
	if rules.CheckClientAddr(m.advertisedClientAddr()) != nil {
		lg.Warn("clients cannot learn this member's client address: it is bound to an address nobody can dial; give the address clients reach it at (baton server --advertise-client-addr)",
			"client_addr", clientL.Addr().String())
	}
	lg.Info("member started", "client_addr", clientL.Addr().String(), "advertised_client_addr", m.advertisedClientAddr(), "peer_addr", tr.Addr().String(),
		"dashboard", "http://"+clientL.Addr().String()+dashboard.Prefix,
		"data_dir", cfg.DataDir, "members", len(peers))
	return m, nil
}

type atomicNode = atomic.Pointer[raftnode.Node]

// handler feeds the transport's deliveries to the node once it exists.
type handler struct {
	node atomicNode
}

func (h *handler) Receive(groupID uint64, msg *raftpb.Message) {
	if n := h.node.Load(); n != nil && groupID == GroupID {
		n.Step(msg)
	}
}

func (h *handler) ReportUnreachable(groupID uint64, id uint64) {
	if n := h.node.Load(); n != nil && groupID == GroupID {
		n.ReportUnreachable(id)
	}
}

// membershipChanged points the transport at the members the node
// applied (on the Ready loop; quick). A name and address come from the
// log's record of the member, else from InitialCluster.
func (m *Member) membershipChanged(ms raftnode.Membership) {
	m.membership.Store(&ms)
	if m.tr == nil || len(ms.Voters) == 0 {
		// A joining member knows no configuration until the leader's
		// log or snapshot reaches it: keep the peers it started with.
		return
	}
	peers := map[uint64]transport.Peer{}
	for _, id := range append(slices.Clone(ms.Voters), ms.Learners...) {
		if name, addr, _ := m.known(ms, id); addr != "" {
			peers[id] = transport.Peer{Name: name, Addr: addr}
		} else if id != MemberID(m.cfg.Name) {
			m.log.Warn("no address for member: it is neither recorded in the log nor in the initial cluster", "id", fmt.Sprintf("%x", id))
		}
	}
	m.tr.SetPeers(peers)
	var removed []uint64
	for _, r := range ms.Members {
		if r.Removed {
			removed = append(removed, r.ID)
		}
	}
	m.tr.SetRemoved(removed)
}

// known is member id's name and peer address as known here: the log's
// record of it, else InitialCluster's; ok is false if neither has it.
func (m *Member) known(ms raftnode.Membership, id uint64) (name, peerAddr string, ok bool) {
	for _, r := range ms.Members {
		if r.ID == id {
			return r.Name, r.PeerAddr, true
		}
	}
	for _, p := range m.peers {
		if p.ID == id {
			return p.Name, p.PeerAddr, true
		}
	}
	return "", "", false
}

// peerAddr is member id's peer address as known here.
func (m *Member) peerAddr(ms raftnode.Membership, id uint64) string {
	_, addr, _ := m.known(ms, id)
	return addr
}

// members lists the cluster with every client address known so far: the
// voters and learners the node applied, named by the log's records (or
// InitialCluster); before the node published any, InitialCluster.
func (m *Member) members() []server.Member {
	self := MemberID(m.cfg.Name)
	var out []server.Member
	ms := m.membership.Load()
	if ms == nil || len(ms.Voters)+len(ms.Learners) == 0 {
		for _, p := range m.peers {
			out = append(out, server.Member{Name: p.Name, ID: p.ID, PeerAddr: p.PeerAddr})
		}
	} else {
		name := func(id uint64) string {
			if name, _, ok := m.known(*ms, id); ok {
				return name
			}
			if id == self {
				return m.cfg.Name
			}
			return fmt.Sprintf("%x", id)
		}
		for _, id := range ms.Voters {
			out = append(out, server.Member{Name: name(id), ID: id, PeerAddr: m.peerAddr(*ms, id)})
		}
		for _, id := range ms.Learners {
			out = append(out, server.Member{Name: name(id), ID: id, PeerAddr: m.peerAddr(*ms, id), Learner: true})
		}
		slices.SortFunc(out, func(a, b server.Member) int { return strings.Compare(a.Name, b.Name) })
	}
	for i := range out {
		if out[i].ID == self {
			out[i].ClientAddr = m.advertisedClientAddr()
			if m.tr != nil {
				out[i].PeerAddr = m.tr.Addr().String()
			}
			out[i].LogVersion = m.readsLogVersion()
		} else if m.tr != nil {
			if _, addr, ok := m.tr.PeerInfo(out[i].ID); ok {
				out[i].ClientAddr = addr
			}
			out[i].LogVersion, _ = m.tr.PeerLogVersion(out[i].ID)
		}
	}
	return out
}

// ClientAddr is the address the client API listens on.
func (m *Member) ClientAddr() string {
	if m.clientL == nil {
		return ""
	}
	return m.clientL.Addr().String()
}

// advertisedClientAddr is the client address the member tells others:
// Config.AdvertiseClientAddr, else the address it is bound to.
func (m *Member) advertisedClientAddr() string {
	if m.cfg.AdvertiseClientAddr != "" {
		return m.cfg.AdvertiseClientAddr
	}
	return m.ClientAddr()
}

// PeerAddr is the address the peer transport listens on.
func (m *Member) PeerAddr() string { return m.tr.Addr().String() }

// Close stops serving and closes the log. It is safe to call twice.
func (m *Member) Close() {
	m.closeOnce.Do(func() {
		if m.srv != nil {
			m.srv.Stop()
		}
		if m.api != nil {
			m.api.Close()
		} else if m.clientL != nil {
			m.clientL.Close()
		}
		if m.stopTrack != nil {
			m.stopTrack()
			<-m.trackDone
			if m.keysDone != nil {
				<-m.keysDone
			}
		}
		if m.node != nil {
			m.node.Stop()
		}
		if m.tr != nil {
			m.tr.Stop()
		}
		if m.disk != nil {
			m.disk.Stop()
		}
		if m.store != nil {
			if err := m.store.Close(); err != nil {
				m.log.Warn("close store", "err", err)
			}
		}
	})
}
