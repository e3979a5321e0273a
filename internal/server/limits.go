package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
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
	// MaxSessionsPerUser bounds the live sessions one user opened, with
	// authentication on, counted as MaxSessions is: an open over it is
	// refused before it is proposed (--max-sessions-per-user). Sessions
	// opened while authentication is off are no user's and not counted.
	MaxSessionsPerUser int
	// MaxKeepAliveRate bounds one session's keepalives (resumes
	// included) a second, as many at once, on the leader; one over it is
	// refused before its ReadIndex round (--max-keepalive-rate).
	MaxKeepAliveRate int
}

var (
	// errTooManySessions refuses an open over Limits.MaxSessions or
	// Limits.MaxSessionsPerUser.
	errTooManySessions = errors.New("too many sessions")
	// errTooManyUserSessions is errTooManySessions for an open over
	// Limits.MaxSessionsPerUser.
	errTooManyUserSessions = fmt.Errorf("%w of one user", errTooManySessions)
	// errKeepAliveRate refuses a keepalive over Limits.MaxKeepAliveRate.
	errKeepAliveRate = errors.New("keepalives too frequent")
)

// proposeOpen is propose for cmd, an OpenSession, on a leader with room
// for the session it would open: live sessions (the state machine's) plus
// the opens in flight stay within MaxSessions, and those of the command's
// user within MaxSessionsPerUser. An open holds its places from before
// the count until its proposal's outcome is known, applied or failed,
// even if ctx ends the waiting first, so opens at once cannot overshoot.
// An open that applied is counted twice until its outcome arrives a
// moment later (the Ready loop applies a batch, then completes it), and
// one in flight may fail; so an open that finds every place taken, but
// not every one by a live session, waits for the outcome of an open in
// flight and looks again. An open is refused exactly when the state
// machine holds MaxSessions live sessions, or MaxSessionsPerUser of its
// user's.
func (s *Server) proposeOpen(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	lim := openLimits{total: s.cfg.Limits.MaxSessions}
	if user := cmd.GetPrincipal(); user != "" && s.cfg.Limits.MaxSessionsPerUser > 0 {
		lim.user, lim.perUser = user, s.cfg.Limits.MaxSessionsPerUser
	}
	if (lim.total <= 0 && lim.perUser <= 0) || !s.node.IsLeader() {
		return s.propose(ctx, cmd) // a follower's refusal names the leader
	}
	reserved, err := s.opens.reserve(ctx, lim, func() (live, users int, retry bool) {
		s.node.View(func(m *fsm.Machine) {
			live, users = m.NumSessions(), m.NumSessionsOf(lim.user)
			_, retry = m.RetriedOpen(cmd)
		})
		return live, users, retry
	})
	switch {
	case errors.Is(err, errTooManyUserSessions):
		s.userSessionsRefused.Add(1)
		return nil, err
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
		s.opens.release(lim.user)
		done <- outcome{res, err}
	})
	if err != nil {
		s.opens.release(lim.user)
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

// openLimits are the bounds an open is counted under: total live
// sessions (0: none), and perUser live sessions of user (0, with user
// "": none).
type openLimits struct {
	total   int
	user    string
	perUser int
}

// openSlots counts the opens in flight that hold a place under
// Limits.MaxSessions, and each user's under Limits.MaxSessionsPerUser.
type openSlots struct {
	mu      sync.Mutex
	n       int
	byUser  map[string]int
	changed chan struct{} // closed, and replaced, when n goes down
}

// reserve takes a place under lim for an open and reports true, or
// reports false for a retry of the open that made a live session (it
// opens none), or refuses with errTooManySessions when the live sessions
// fill every place, or every place of lim.user. count reads the state
// machine's live sessions, those of lim.user, and whether the open is
// such a retry; reserve calls it with o.mu held.
func (o *openSlots) reserve(ctx context.Context, lim openLimits, count func() (live, users int, retry bool)) (bool, error) {
	for {
		o.mu.Lock()
		live, users, retry := count()
		switch {
		case retry:
			o.mu.Unlock()
			return false, nil
		case lim.total > 0 && live >= lim.total:
			o.mu.Unlock()
			return false, fmt.Errorf("%w: the cluster has %d live sessions, the most its leader admits (--max-sessions); close sessions or raise the limit",
				errTooManySessions, live)
		case lim.perUser > 0 && users >= lim.perUser:
			o.mu.Unlock()
			return false, fmt.Errorf("%w: user %q has %d live sessions, the most the leader admits of one user (--max-sessions-per-user); close some of them or raise the limit",
				errTooManyUserSessions, lim.user, users)
		case (lim.total <= 0 || live+o.n < lim.total) && (lim.perUser <= 0 || users+o.byUser[lim.user] < lim.perUser):
			o.n++
			if lim.user != "" {
				if o.byUser == nil {
					o.byUser = make(map[string]int)
				}
				o.byUser[lim.user]++
			}
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

// release gives back the places of an open of user (as reserve was given
// it in openLimits) whose outcome is known.
func (o *openSlots) release(user string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n--
	if user != "" {
		if o.byUser[user]--; o.byUser[user] == 0 {
			delete(o.byUser, user)
		}
	}
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}
