// Package server is Baton's client API: one gRPC service (baton.v1) and its
// HTTP/JSON face, on one address split by protocol. It validates every
// request before anything is proposed, turns requests into log commands,
// waits for them to apply, pushes grants of queued acquires to their
// sessions, and maps every internal error to one gRPC code and Reason
// (errors.go).
//
// Followers do not forward: calls that need the leader get UNAVAILABLE with
// Reason NOT_LEADER and the leader's client address in the error's
// ErrorInfo metadata ("leader_addr"); the Go client follows it.
package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/raftnode"
)

// Member describes one member of the cluster as the server reports it.
type Member struct {
	Name       string
	ID         uint64
	PeerAddr   string
	ClientAddr string
	Learner    bool
	// LogVersion is the newest log version the member reads; 0 if not
	// heard from.
	LogVersion uint32
}

func (m Member) toProto() *batonpb.Member {
	return &batonpb.Member{Name: m.Name, Id: m.ID, PeerAddr: m.PeerAddr, ClientAddr: m.ClientAddr, Learner: m.Learner, LogVersion: m.LogVersion}
}

// Node is the Raft node as the server uses it (*raftnode.Node): it
// proposes and waits, reads the state machine, and reads and changes the
// membership.
type Node interface {
	Propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, uint64, error)
	SubmitTo(cmd *fsmpb.Command, c raftnode.Completer) error
	SubmitFunc(cmd *fsmpb.Command, done func(res *fsmpb.Result, index uint64, err error)) error
	Refuse(ctx context.Context, cmd *fsmpb.Command, refusal error) error
	ReadBarrier(ctx context.Context) error
	View(f func(m *fsm.Machine))
	IsLeader() bool
	Leader() uint64
	Status() raftnode.Status
	Metrics() raftnode.Metrics
	LogVersion() uint32
	Membership() raftnode.Membership
	ChangeMembership(ctx context.Context, cc *raftpb.ConfChange) error
	Progress(ctx context.Context, id uint64) (match, commit uint64, ok bool, err error)
	TransferLeadership(ctx context.Context, to uint64) (uint64, error)
	Backup(ctx context.Context) (raftnode.Backup, error)
}

// Liveness is the leader's clock of sessions and limited holds
// (*liveness.Tracker), as keepalives and renewals use it (keepalive.go).
// Its errors are liveness's sentinels, which errors.go maps to codes.
type Liveness interface {
	// Admit checks that a keepalive for session id, showing the secret
	// hash shown, is its owner's and within perSecond.
	Admit(id uint64, shown []byte, received time.Time, perSecond int) error
	// Heartbeat extends session id to received+TTL and returns the TTL.
	Heartbeat(id uint64, received time.Time) (time.Duration, error)
	// CheckHold checks that a renewal of a hold is its owner's.
	CheckHold(lock string, session, token uint64, shown []byte) error
	// RenewHold restarts a limited hold's limit from received.
	RenewHold(lock string, session, token uint64, received time.Time) (time.Duration, error)
}

// Config configures a Server.
type Config struct {
	// Name is this member's name; Version is reported by Status.
	Name    string
	Version string
	// Node is the Raft node the server proposes to and reads from.
	Node Node
	// Liveness keeps the leader's session deadlines and hold limits; the
	// caller runs it and feeds it what applies.
	Liveness Liveness
	// Members returns the cluster's members with the client addresses
	// known so far (peers' addresses are learnt from the transport).
	Members func() []Member
	// MemberID is the Raft id of a member name (membership changes).
	MemberID func(name string) uint64
	// Operators, when not empty, are the subject common names of the
	// client certificates that may make operator calls (Blacklist,
	// CasRelease, membership changes); other clients get
	// PERMISSION_DENIED. Empty: any client may.
	Operators []string
	// Limits bound what clients may take of this member (limits.go).
	Limits Limits
	// LockDelays are the lock-delays this member, leading, gives the holds
	// of acquires that state none (lockdelay.go).
	LockDelays LockDelays
	// SignedTokens: this member signs every grant it answers with the
	// cluster's current signing key, and, leading a cluster that has
	// none, proposes the first one (signing.go). Start every member of a
	// cluster alike.
	SignedTokens bool
	// Disk keeps clients from filling the data dir (space.go).
	Disk DiskGuard
	// MetricsPrefixDepth is how many '/'-separated segments of a lock's
	// name label its metrics (lockmetrics.go): 1 counts "jobs/42" under
	// "jobs/"; 0 labels none.
	MetricsPrefixDepth int
	Logger             *slog.Logger
}

// Server implements batonpb.BatonServer. Whoever observes the node feeds
// it what applied (Deliver, Flush, Restored, StoppedLeading): that is
// how queued grants, ended waits and lost holds reach their clients.
type Server struct {
	batonpb.UnimplementedBatonServer

	cfg     Config
	log     *slog.Logger
	node    Node
	tracker Liveness
	hub     *hub
	watches *watches
	// applied wakes the dashboard's feeds after each batch (feed.go).
	applied applied
	// authCache is what authentication reads of the auth state.
	authCache authCache
	// keys is this member's copy of the signing keys (signing.go).
	keys signingKeys

	stopOnce sync.Once
	stopC    chan struct{}
	// flusherOnce starts the flusher (flush.go) with the first stream
	// it may send for.
	flusherOnce sync.Once

	// Sessions streams' batching, for /metrics.
	streamMessages, streamResponses atomic.Uint64
	framedStreams                   atomic.Uint64 // Sessions streams on streamconn
	// backups counts the backups being taken or sent (MaxBackups).
	backups atomic.Int32
	// clientConns is the client port's listener once Serve started.
	clientConns atomic.Pointer[trackedListener]
	// handshakesFailed counts client connections closed before they
	// showed gRPC or HTTP/1 in time.
	handshakesFailed atomic.Uint64
	// opens are the opens in flight that hold a place under
	// Limits.MaxSessions (and MaxSessionsPerUser); sessionsRefused and
	// userSessionsRefused count those refused for each.
	opens                                openSlots
	sessionsRefused, userSessionsRefused atomic.Uint64
	// keepAlivesRefused counts keepalives over Limits.MaxKeepAliveRate.
	keepAlivesRefused atomic.Uint64
	// noSpaceRefused counts opens and acquires refused by Config.Disk.
	noSpaceRefused atomic.Uint64
	// locks are the lock metrics; registry is what /metrics serves.
	locks    *lockMetrics
	registry *prometheus.Registry
}

// New returns a Server of cfg.Node, ready to serve.
func New(cfg Config) *Server {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		log:     lg.With("component", "server"),
		node:    cfg.Node,
		tracker: cfg.Liveness,
		hub:     newHub(),
		watches: newWatches(),
		stopC:   make(chan struct{}),
	}
	s.hub.signs = cfg.SignedTokens
	s.keys.poke = make(chan struct{}, 1)
	s.pokeSigningKey() // KeepSigningKey looks once at its start
	s.locks = newLockMetrics(cfg.MetricsPrefixDepth, func(f func(*fsm.Machine)) { s.node.View(f) })
	s.registry = s.newRegistry()
	return s
}

// Stop ends every session stream served so far.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopC) }) }

// Deliver hands the outcome of one applied command, the entry at index,
// to whoever waits for it here: unary acquires and session channels
// (grants, ended waits, ended holds, ended sessions); and counts it in
// the lock metrics. Call it on the Ready loop, in log order; what it
// queues leaves at the next Flush.
func (s *Server) Deliver(index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	s.locks.applied(index, cmd, res)
	if cmd.GetAuthChange() != nil {
		s.authCache.dirty.Store(true)
		s.watches.authChanged()
	}
	if cmd.GetRotateSigningKey() != nil || cmd.GetSetLogVersion() != nil {
		s.keysChanged()
	}
	if len(res.GetGrants()) > 0 || len(res.GetWaitsEnded()) > 0 || len(res.GetSessionsEnded()) > 0 || len(res.GetHoldsEnded()) > 0 ||
		len(res.GetHoldsRevoked()) > 0 {
		s.hub.publish(res)
	}
}

// Inspect reads the state machine m as the command at index left it,
// before the next command of its batch is applied: each watched lock the
// command changed is read then, so that watches report every change, each
// as of its own entry. Call it on the Ready loop with m locked, in log
// order; what it queues leaves at the next Flush.
func (s *Server) Inspect(index uint64, cmd *fsmpb.Command, res *fsmpb.Result, m *fsm.Machine) {
	s.watches.inspect(index, cmd, res, m)
}

// Flush sends what Deliver and the Ready loop's completions queued since
// the last Flush: each Sessions stream's sender wakes once for the batch,
// watches read the locks it changed, and the dashboard's feeds wake.
func (s *Server) Flush() {
	s.locks.flushed()
	s.hub.flush()
	s.watches.flush()
	s.applied.notify()
}

// Restored tells the server that the state machine was replaced by a
// snapshot: watched locks and the auth state may all have changed.
func (s *Server) Restored() {
	s.locks.reseed = true
	s.watches.restored()
	s.watches.authChanged()
	s.authCache.dirty.Store(true)
	s.keysChanged()
}

// StoppedLeading ends every session stream served here: this member
// cannot serve them any more, and the error names the new leader, which
// their clients follow.
func (s *Server) StoppedLeading() {
	s.locks.stoppedLeading()
	s.hub.dropAll(s.toStatus(&raftnode.NotLeaderError{Leader: s.node.Leader()}))
}

// leaderAddr is the client address of the current leader, if known.
func (s *Server) leaderAddr() string {
	if s.node == nil || s.cfg.Members == nil {
		return ""
	}
	lead := s.node.Leader()
	for _, m := range s.cfg.Members() {
		if m.ID == lead {
			return m.ClientAddr
		}
	}
	return ""
}

// propose stamps cmd with the wall clock (display only), replicates it and
// returns its result, or the fsm's refusal as an error.
func (s *Server) propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	cmd.WallTimeUnixNano = time.Now().UnixNano()
	res, _, err := s.node.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, fsm.ErrorOf(res)
}

// isRefusal reports whether err is the state machine's deterministic
// refusal (the command applied and changed nothing).
func isRefusal(err error) bool {
	var fe *fsm.Error
	return errors.As(err, &fe)
}
