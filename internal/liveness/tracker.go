// Package liveness is the only place where a clock affects lock semantics.
// On the leader it keeps every session's deadline and every timed wait's
// deadline in memory, on the monotonic clock, and proposes ExpireSession and
// CancelWait commands when they pass. Nothing here is replicated: a new
// leader starts from its own promotion and grants every session a full TTL
// and every timed wait its full timeout (DESIGN.md section 2, "Time").
package liveness

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Proposer puts the tracker's decisions into the log. Calls block until
// the command applies or fails; the tracker makes them on goroutines of
// its own.
type Proposer interface {
	ExpireSession(ctx context.Context, id uint64) error
	CancelWait(ctx context.Context, lock string, session, acquireSeq uint64) error
}

var (
	// ErrNotLeader is returned by Heartbeat on a node that is not leading.
	ErrNotLeader = errors.New("liveness: not the leader")
	// ErrSessionLost is returned by Heartbeat for a session that is
	// unknown, expired, or whose expiry is being proposed.
	ErrSessionLost = errors.New("liveness: session lost")
	// ErrBlacklisted is returned by Heartbeat for a blacklisted session.
	ErrBlacklisted = errors.New("liveness: session is blacklisted")
)

// RetryDelay is how long the tracker waits before proposing again a
// decision whose proposal failed (leader busy, leadership changing).
const RetryDelay = 100 * time.Millisecond

type session struct {
	ttl         time.Duration
	deadline    time.Time
	blacklisted bool
	expiring    bool
}

type waitKey struct {
	lock    string
	session uint64
	seq     uint64
}

type wait struct {
	deadline   time.Time
	cancelling bool
}

// Tracker keeps deadlines on the leader. Its methods are safe for
// concurrent use.
type Tracker struct {
	p   Proposer
	log *slog.Logger

	mu       sync.Mutex
	leader   bool
	term     uint64
	sessions map[uint64]*session
	waits    map[waitKey]*wait
	wake     chan struct{}
	wg       sync.WaitGroup
}

// New returns a tracker that proposes through p. Start runs it.
func New(p Proposer, log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{
		p:        p,
		log:      log.With("component", "liveness"),
		sessions: make(map[uint64]*session),
		waits:    make(map[waitKey]*wait),
		wake:     make(chan struct{}, 1),
	}
}

// Promote makes the tracker lead: every live session gets a full TTL and
// every timed wait its full timeout, counted from now. m is read during
// the call only.
func (t *Tracker) Promote(term uint64, m *fsm.Machine) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = true
	t.term = term
	clear(t.sessions)
	clear(t.waits)
	for _, s := range m.SessionIDs() {
		t.sessions[s.ID] = &session{ttl: s.TTL, deadline: now.Add(s.TTL), blacklisted: s.Blacklisted}
	}
	for _, w := range m.Waiters() {
		t.waits[waitKey{w.Lock, w.SessionID, w.AcquireSeq}] = &wait{deadline: now.Add(w.Timeout)}
	}
	t.log.Info("leading: deadlines restarted", "term", term, "sessions", len(t.sessions), "timed_waits", len(t.waits))
	t.poke()
}

// Demote stops deciding: a follower forgets every deadline.
func (t *Tracker) Demote() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = false
	clear(t.sessions)
	clear(t.waits)
}

// Applied follows the state machine: sessions and timed waits come and go.
// It is called in log order on the apply path.
func (t *Tracker) Applied(cmd *fsmpb.Command, res *fsmpb.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leader {
		return
	}
	now := time.Now()
	changed := false
	if res.GetError() == fsmpb.Error_ERROR_NONE {
		switch op := cmd.GetOp().(type) {
		case *fsmpb.Command_OpenSession:
			ttl := time.Duration(op.OpenSession.GetTtlNanos())
			t.sessions[res.GetSessionId()] = &session{ttl: ttl, deadline: now.Add(ttl)}
			changed = true
		case *fsmpb.Command_BlacklistSession:
			if s := t.sessions[op.BlacklistSession.GetSessionId()]; s != nil {
				s.blacklisted = true
			}
		case *fsmpb.Command_Acquire:
			a := res.GetAcquire()
			if a.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED && op.Acquire.GetWaitTimeoutNanos() > 0 {
				t.waits[waitKey{a.GetLock(), cmd.GetSessionId(), cmd.GetSeq()}] = &wait{
					deadline: now.Add(time.Duration(op.Acquire.GetWaitTimeoutNanos())),
				}
				changed = true
			}
		}
	}
	for _, g := range res.GetGrants() {
		delete(t.waits, waitKey{g.GetLock(), g.GetSessionId(), g.GetAcquireSeq()})
	}
	for _, w := range res.GetWaitsEnded() {
		delete(t.waits, waitKey{w.GetLock(), w.GetSessionId(), w.GetAcquireSeq()})
	}
	for _, id := range res.GetSessionsEnded() {
		delete(t.sessions, id)
	}
	if changed {
		t.poke()
	}
}

// Check reports whether a keepalive for id could be accepted now, without
// extending anything. The server calls it before its ReadIndex round so a
// lost session is told at once.
func (t *Tracker) Check(id uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.lookup(id)
	return err
}

// Heartbeat extends session id to received+TTL, where received is the
// monotonic time the keepalive arrived. The caller must have confirmed
// leadership (ReadIndex) after received. It returns the session's TTL.
func (t *Tracker) Heartbeat(id uint64, received time.Time) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id)
	if err != nil {
		return 0, err
	}
	if d := received.Add(s.ttl); d.After(s.deadline) {
		s.deadline = d
	}
	return s.ttl, nil
}

func (t *Tracker) lookup(id uint64) (*session, error) {
	if !t.leader {
		return nil, ErrNotLeader
	}
	s := t.sessions[id]
	switch {
	case s == nil || s.expiring:
		return nil, ErrSessionLost
	case s.blacklisted:
		return nil, ErrBlacklisted
	}
	return s, nil
}

// Remaining is how long session id has left on the leader's clock.
func (t *Tracker) Remaining(id uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[id]
	if s == nil || !t.leader {
		return 0, false
	}
	return time.Until(s.deadline), true
}

func (t *Tracker) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run proposes expiries and wait timeouts until ctx ends, then waits for
// the proposals it started.
func (t *Tracker) Run(ctx context.Context) {
	defer t.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := t.fire(ctx)
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-t.wake:
		}
	}
}

// fire starts a proposal for every passed deadline and returns the next
// deadline (zero if none).
func (t *Tracker) fire(ctx context.Context) time.Time {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leader {
		return time.Time{}
	}
	var next time.Time
	later := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	for id, s := range t.sessions {
		if s.expiring {
			continue
		}
		if now.Before(s.deadline) {
			later(s.deadline)
			continue
		}
		s.expiring = true
		term := t.term
		t.wg.Go(func() {
			err := t.p.ExpireSession(ctx, id)
			if err != nil {
				t.log.Warn("expire session", "session", id, "err", err)
				t.retry(term, func() {
					if s := t.sessions[id]; s != nil {
						s.expiring = false
					}
				})
			}
		})
	}
	for k, w := range t.waits {
		if w.cancelling {
			continue
		}
		if now.Before(w.deadline) {
			later(w.deadline)
			continue
		}
		w.cancelling = true
		term := t.term
		t.wg.Go(func() {
			err := t.p.CancelWait(ctx, k.lock, k.session, k.seq)
			if err != nil {
				t.log.Warn("cancel wait", "lock", k.lock, "session", k.session, "err", err)
				t.retry(term, func() {
					if w := t.waits[k]; w != nil {
						w.cancelling = false
					}
				})
			}
		})
	}
	return next
}

// retry re-arms a failed decision after RetryDelay if this node still
// leads in the same term (a new term re-derives everything in Promote).
func (t *Tracker) retry(term uint64, rearm func()) {
	time.AfterFunc(RetryDelay, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.leader && t.term == term {
			rearm()
			t.poke()
		}
	})
}
