package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
)

// Limits bound what clients may take of a member (DESIGN.md section 4):
// each refuses new work, never work already acknowledged, and a refusal
// names the limit and the `baton server` flag that sets it. A zero field
// is no limit; embed.DefaultConfig gives every one its default.
type Limits struct {
	// MaxClientConns bounds the connections open on the client port; one
	// more is closed as soon as it is accepted (--max-client-conns).
	MaxClientConns int
	// HandshakeTimeout bounds the time from accepting a connection until
	// it shows whether it speaks gRPC or HTTP/1, its TLS handshake
	// included, and until an HTTP request's header is read
	// (--conn-handshake-timeout).
	HandshakeTimeout time.Duration
	// IdleTimeout closes an HTTP/1 keep-alive connection idle between
	// requests, and a gRPC connection without a call, for that long
	// (--conn-idle-timeout).
	IdleTimeout time.Duration
	// MaxSessions bounds the live sessions of the cluster, as its leader
	// counts them: an open over it is refused before it is proposed
	// (--max-sessions). Resuming a session, or retrying an open that made
	// a live one, opens none and is never refused.
	MaxSessions int
	// MaxKeepAliveRate bounds one session's keepalives (resumes
	// included) a second, as many at once, on the leader; one over it is
	// refused before its ReadIndex round (--max-keepalive-rate).
	MaxKeepAliveRate int
}

var (
	// errTooManySessions refuses an open over Limits.MaxSessions.
	errTooManySessions = errors.New("too many sessions")
	// errKeepAliveRate refuses a keepalive over Limits.MaxKeepAliveRate.
	errKeepAliveRate = errors.New("keepalives too frequent")
)

// admitKeepAlive checks that session id lives and that a keepalive
// received then is within its rate: the tracker keeps the rate with the
// session's deadline, in the leader's memory only.
func (s *Server) admitKeepAlive(id uint64, received time.Time) error {
	rate := s.cfg.Limits.MaxKeepAliveRate
	err := s.tracker.Admit(id, received, rate)
	if errors.Is(err, liveness.ErrTooFast) {
		s.keepAlivesRefused.Add(1)
		return fmt.Errorf("%w: session %d sent more than %d keepalives a second (--max-keepalive-rate); one every third of its TTL keeps it",
			errKeepAliveRate, id, rate)
	}
	return err
}

// proposeOpen is propose for cmd, an OpenSession, on a leader with room
// for the session it would open. Every open in flight holds a place from
// before the leader counts the live sessions until its outcome is known,
// applied or failed, even if ctx ends the waiting first: opens at once
// can never together take the cluster past MaxSessions. (A place may be
// counted twice for a moment, in the count of live sessions and as in
// flight: then an open at the limit is refused that would have fitted.)
func (s *Server) proposeOpen(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	limit := s.cfg.Limits.MaxSessions
	if limit <= 0 || s.node == nil || !s.node.IsLeader() {
		return s.propose(ctx, cmd) // a follower's refusal names the leader
	}
	opening := s.opening.Add(1)
	release := func() { s.opening.Add(-1) }
	var live int
	var retry bool
	s.node.View(func(m *fsm.Machine) {
		live = m.NumSessions()
		_, retry = m.RetriedOpen(cmd.GetOpenSession())
	})
	switch {
	case retry:
		release()
		return s.propose(ctx, cmd)
	case live+int(opening) > limit:
		release()
		s.sessionsRefused.Add(1)
		return nil, fmt.Errorf("%w: the cluster has %d live sessions and %d being opened, and its leader admits %d (--max-sessions); close sessions or raise the limit",
			errTooManySessions, live, opening-1, limit)
	}
	type outcome struct {
		res *fsmpb.Result
		err error
	}
	done := make(chan outcome, 1)
	cmd.WallTimeUnixNano = time.Now().UnixNano()
	err := s.node.SubmitFunc(cmd, func(res *fsmpb.Result, _ uint64, err error) {
		release()
		done <- outcome{res, err}
	})
	if err != nil {
		release()
		return nil, err
	}
	select {
	case o := <-done:
		if o.err != nil {
			return nil, o.err
		}
		return o.res, fsm.ErrorOf(o.res)
	case <-ctx.Done():
		return nil, ctx.Err() // the open may still apply, and keeps its place until then
	}
}
