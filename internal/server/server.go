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

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
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

// Config configures a Server.
type Config struct {
	// Name is this member's name; Version is reported by Status.
	Name    string
	Version string
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
	// Disk keeps clients from filling the data dir (space.go).
	Disk   DiskGuard
	Logger *slog.Logger
}

// Server implements batonpb.BatonServer and raftnode.Observer.
type Server struct {
	batonpb.UnimplementedBatonServer

	cfg     Config
	log     *slog.Logger
	node    *raftnode.Node
	tracker *liveness.Tracker
	hub     *hub
	watches *watches
	// authCache is what authentication reads of the auth state.
	authCache authCache

	stopOnce sync.Once
	stopC    chan struct{}

	// Sessions streams' batching, for /metrics.
	muxMessages, muxResponses atomic.Uint64
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
}

// New returns a Server. Attach gives it its node before it serves.
func New(cfg Config) *Server {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		log:     lg.With("component", "server"),
		hub:     newHub(),
		watches: newWatches(),
		stopC:   make(chan struct{}),
	}
	s.tracker = liveness.New(proposer{s}, lg)
	return s
}

// Tracker is the server's leader-side liveness tracker; the caller runs it.
func (s *Server) Tracker() *liveness.Tracker { return s.tracker }

// Attach sets the Raft node the server proposes to. Call it once, before
// serving.
func (s *Server) Attach(n *raftnode.Node) { s.node = n }

// Stop ends every session stream served so far.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopC) }) }

// Applied implements raftnode.Observer: it feeds the liveness tracker and
// pushes grants, ended waits, ended holds and ended sessions to whoever
// waits for them.
func (s *Server) Applied(index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	s.tracker.Applied(res)
	if cmd.GetAuthChange() != nil {
		s.authCache.dirty.Store(true)
	}
	s.watches.touched(cmd, res)
	if len(res.GetGrants()) > 0 || len(res.GetWaitsEnded()) > 0 || len(res.GetSessionsEnded()) > 0 || len(res.GetHoldsEnded()) > 0 {
		s.hub.publish(res)
	}
}

// Flush implements raftnode.Observer: it wakes the stream senders of the
// answers and pushes the loop queued since the last Flush.
func (s *Server) Flush() {
	s.hub.flush()
	if s.watches.active.Load() > 0 {
		// s.node is read only with a watch open: the loop can flush
		// before Attach, and a watch comes only after it.
		s.watches.flush(s.node.View)
	}
}

// Restored implements raftnode.Observer: watched locks may all have
// changed.
func (s *Server) Restored(uint64) {
	s.watches.restored()
	s.authCache.dirty.Store(true)
}

// LeaderChanged implements raftnode.Observer.
func (s *Server) LeaderChanged(isLeader bool, term uint64, m *fsm.Machine) {
	if isLeader {
		s.tracker.Promote(term, m)
	} else {
		s.tracker.Demote()
		// Streams attached here cannot be served any more: end them so
		// their clients follow the new leader.
		var lead uint64
		if s.node != nil {
			lead = s.node.Leader()
		}
		s.hub.dropAll(s.toStatus(&raftnode.NotLeaderError{Leader: lead}))
	}
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

// proposer lets the liveness tracker propose through the server's node.
type proposer struct{ s *Server }

// proposeTimeout bounds the tracker's own proposals.
const proposeTimeout = 5 * time.Second

func (p proposer) ExpireSession(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: id}}}
	_, err := p.s.propose(ctx, cmd)
	if err != nil && !isRefusal(err) {
		return err
	}
	p.s.log.Info("session expired", "session", id)
	return nil
}

func (p proposer) CancelWait(ctx context.Context, lock string, session, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	cmd := &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: lock, SessionId: session, AcquireSeq: seq, TimedOut: true,
	}}}
	_, err := p.s.propose(ctx, cmd)
	if err != nil && !isRefusal(err) {
		return err
	}
	return nil
}

func (p proposer) ExpireHold(ctx context.Context, lock string, session, token uint64) error {
	ctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	defer cancel()
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{
		Lock: lock, SessionId: session, Token: token,
	}}}
	_, err := p.s.propose(ctx, cmd)
	if err != nil && !isRefusal(err) {
		return err
	}
	if err == nil {
		p.s.log.Info("hold limit passed: hold expired", "lock", lock, "session", session, "token", token)
	}
	return nil
}

// propose stamps cmd with the wall clock (display only), replicates it and
// returns its result, or the fsm's refusal as an error.
func (s *Server) propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	if s.node == nil {
		return nil, raftnode.ErrStopped
	}
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
