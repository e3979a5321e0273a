package baton

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/rules"
)

// Mutex is a handle on one lock for one (session, owner key). It holds no
// state of its own beyond its name and options: every Mutex of the same
// session, name and key shares one hold (see WithOwnerKey), and a Mutex is
// safe for concurrent use.
type Mutex struct {
	s    *Session
	name string
	hold holdConfig
	// shared and limit are a Semaphore's or RWMutex's mode (see there);
	// a Mutex is exclusive with limit 1.
	shared bool
	limit  uint32
	// kind is the handle the Mutex serves: "Mutex", "Semaphore",
	// "RWMutex" or "LockSet" (a LockSet's mutex).
	kind string
	// err is why no acquire of the handle can be sent (a name or an
	// option that breaks a rule); each acquire returns it.
	err error
	// value is the value of the holds the handle makes (an Election's
	// campaign: election.go); "" for none.
	value string
}

// Mutex returns a handle on the lock name for this session. Nothing is
// sent until it is locked. A name or an option that no member would
// accept (see package rules: a name of 1..512 bytes of UTF-8 without
// control characters, an owner key of up to 256 bytes of UTF-8, a hold
// limit of 1 s..24 h), or an option a Mutex does not take
// (WithMaxReaders), makes every acquire fail at once with an error
// matching ErrInvalidArgument that says what is wrong, sending nothing.
func (s *Session) Mutex(name string, opts ...HoldOption) *Mutex {
	return s.mutex(name, newHoldConfig(opts), "Mutex")
}

// mutex makes a handle on name with cfg, checked for a handle of kind
// (see holdConfig.check): the Mutex of Session.Mutex, the one under a
// Semaphore or an RWMutex, and LockAll's locks one by one.
func (s *Session) mutex(name string, cfg holdConfig, kind string) *Mutex {
	return &Mutex{s: s, name: name, hold: cfg, kind: kind, err: cmp.Or(invalid(rules.CheckLockName(name)), cfg.check(kind))}
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// OwnerKey is the Mutex's owner key.
func (m *Mutex) OwnerKey() string { return m.hold.ownerKey }

// Lock acquires the lock, waiting in the lock's FIFO queue on the server
// as long as it takes. ctx bounds the wait only, never the hold: when it
// ends first, Lock cancels the wait on the server (and releases a grant
// that won the race) before it returns ctx.Err(), so the session then
// neither waits nor holds (within CleanupTimeout). If the session already
// holds the lock under the same owner key, Lock re-enters at once (same
// token, count + 1). It fails at once with ErrSessionLost when the session
// ends while it waits.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, true, 0)
}

// TryLock acquires the lock if nobody else holds it or waits for it, and
// answers at once: a *BusyError (matching ErrLockBusy) names the holder
// otherwise.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, false, 0)
}

// LockWithin is Lock with a wait bounded by d on the server: when d passes
// unserved, the waiter leaves the queue and LockWithin returns
// ErrWaitTimedOut. ctx still bounds the wait as it does for Lock. d is
// more than 0 and at most 24 h (rules.MaxWaitTimeout).
func (m *Mutex) LockWithin(ctx context.Context, d time.Duration) (*Lease, error) {
	if err := rules.CheckWaitTimeout(d); err != nil {
		return nil, invalid(err)
	}
	return m.acquire(ctx, true, d)
}

func (m *Mutex) acquire(ctx context.Context, wait bool, d time.Duration) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	sreq, req := acquireRequest()
	req.Name, req.OwnerKey, req.Wait, req.Shared, req.Limit = m.name, m.hold.ownerKey, wait, m.shared, m.limit
	if d > 0 {
		req.WaitTimeout = durationpb.New(d)
	}
	if m.hold.holdLimit != 0 {
		req.HoldLimit = durationpb.New(m.hold.holdLimit)
	}
	req.LockDelay = m.hold.lockDelayField()
	req.Value = m.value
	c, err := m.s.do(ctx, sreq, func(c *call) {
		c.wait, c.name, c.ownerKey = wait, m.name, m.hold.ownerKey
	})
	if err != nil {
		return nil, err
	}
	a := c.resp.GetAcquire()
	if !a.GetAcquired() {
		return nil, busyError(m.name, a)
	}
	started := c.started
	if m.hold.holdLimit != 0 && time.Since(started) > m.hold.holdLimit/2 {
		// A long wait used up much of the limit as the client counts it
		// (from the acquire's first send; the server's count began at
		// the grant): a renewal restarts both now.
		rs, _, err := m.s.renewHold(ctx, m.name, a.GetToken())
		if err != nil {
			m.s.mu.Lock()
			_, _ = m.s.startLocked(releaseRequest(m.name, m.hold.ownerKey, a.GetToken()), true)
			m.s.mu.Unlock()
			return nil, err
		}
		started = rs
	}
	return m.s.newLease(ctx, m.name, a.GetToken(), m.hold, started, a.GetLockDelay().AsDuration(), a.GetSignedToken())
}

// Unlock releases one count of the hold of this Mutex's (session, owner
// key): the Lease acquired last that is not released yet (see
// Lease.Release). It returns ErrNotHeld if there is none.
func (m *Mutex) Unlock(ctx context.Context) error {
	s := m.s
	s.mu.Lock()
	if s.endedLocked() {
		err := s.life.err
		s.mu.Unlock()
		return err
	}
	ls := s.leases.holds[holdKey{m.name, m.hold.ownerKey}]
	if len(ls) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q (key %q) by session %d", ErrNotHeld, m.name, m.hold.ownerKey, s.id)
	}
	c, err := s.releaseLocked(ls[len(ls)-1])
	s.mu.Unlock()
	if c == nil || err != nil {
		return err
	}
	return s.awaitRelease(ctx, c)
}
