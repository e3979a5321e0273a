package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
func (s *Server) admitKeepAlive(id uint64, shown []byte, received time.Time) error {
	rate := s.cfg.Limits.MaxKeepAliveRate
	err := s.tracker.Admit(id, shown, received, rate)
	if errors.Is(err, liveness.ErrTooFast) {
		s.keepAlivesRefused.Add(1)
		return fmt.Errorf("%w: session %d sent more than %d keepalives a second (--max-keepalive-rate); one every third of its TTL keeps it",
			errKeepAliveRate, id, rate)
	}
	return err
}

// proposeOpen is propose for cmd, an OpenSession, on a leader with room
// for the session it would open: live sessions (the state machine's) plus
// the opens in flight stay within MaxSessions. An open holds its place
// from before the count until its proposal's outcome is known, applied or
// failed, even if ctx ends the waiting first, so opens at once cannot
// overshoot. An open that applied is counted twice until its outcome
// arrives a moment later (the Ready loop applies a batch, then completes
// it), and one in flight may fail; so an open that finds every place
// taken, but not every one by a live session, waits for the outcome of an
// open in flight and looks again. An open is refused exactly when the
// state machine holds MaxSessions live sessions.
func (s *Server) proposeOpen(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	limit := s.cfg.Limits.MaxSessions
	if limit <= 0 || s.node == nil || !s.node.IsLeader() {
		return s.propose(ctx, cmd) // a follower's refusal names the leader
	}
	reserved, err := s.opens.reserve(ctx, limit, func() (live int, retry bool) {
		s.node.View(func(m *fsm.Machine) {
			live = m.NumSessions()
			_, retry = m.RetriedOpen(cmd)
		})
		return live, retry
	})
	switch {
	case errors.Is(err, errTooManySessions):
		s.sessionsRefused.Add(1)
		return nil, err
	case err != nil:
		return nil, err
	case !reserved:
		return s.propose(ctx, cmd) // a retry of a live session's open
	}
	type outcome struct {
		res *fsmpb.Result
		err error
	}
	done := make(chan outcome, 1)
	cmd.WallTimeUnixNano = time.Now().UnixNano()
	err = s.node.SubmitFunc(cmd, func(res *fsmpb.Result, _ uint64, err error) {
		s.opens.release()
		done <- outcome{res, err}
	})
	if err != nil {
		s.opens.release()
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

// openSlots counts the opens in flight that hold a place under
// Limits.MaxSessions.
type openSlots struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed, and replaced, when n goes down
}

// reserve takes a place under limit for an open and reports true, or
// reports false for a retry of the open that made a live session (it
// opens none), or refuses with errTooManySessions when the live sessions
// fill every place. count reads the state machine's live sessions and
// whether the open is such a retry; reserve calls it with o.mu held.
func (o *openSlots) reserve(ctx context.Context, limit int, count func() (live int, retry bool)) (bool, error) {
	for {
		o.mu.Lock()
		live, retry := count()
		switch {
		case retry:
			o.mu.Unlock()
			return false, nil
		case live >= limit:
			o.mu.Unlock()
			return false, fmt.Errorf("%w: the cluster has %d live sessions, the most its leader admits (--max-sessions); close sessions or raise the limit",
				errTooManySessions, live)
		case live+o.n < limit:
			o.n++
			o.mu.Unlock()
			return true, nil
		}
		// Every place is live or in flight: wait until an open in flight
		// applies or fails, and look again.
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		changed := o.changed
		o.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// release gives back the place of an open whose outcome is known.
func (o *openSlots) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n--
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}
