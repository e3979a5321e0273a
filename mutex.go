package baton

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
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
	// err is why no acquire of the handle can be sent (a name or an
	// option that breaks a rule); each acquire returns it.
	err error
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
	return &Mutex{s: s, name: name, hold: cfg, err: cmp.Or(invalid(rules.CheckLockName(name)), cfg.check(kind))}
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
	c, err := m.s.do(ctx, sreq, func(c *call) {
		c.wait, c.name, c.ownerKey = wait, m.name, m.hold.ownerKey
	})
	if err != nil {
		return nil, err
	}
	a := c.resp.GetAcquire()
	if !a.GetAcquired() {
		return nil, &BusyError{Name: m.name, Holder: holderOf(a.GetHolder())}
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
	return m.s.newLease(ctx, m.name, a.GetToken(), m.hold, started)
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

// TryLockMany tries every named lock at once, in one request that the
// server applies atomically, each lock granted or refused on its own (owner
// key ""). It returns the leases it got, in the order of names, and the
// names it did not get (held or waited for by someone else; or, when the
// request had to be sent again after its answer was lost, granted to the
// first attempt and ended since, by an operator's CasRelease or its hold
// limit). If ctx ends before the answer, whatever was granted is
// released. For a hold limit or an owner key, use LockSet.
func (s *Session) TryLockMany(ctx context.Context, names ...string) ([]*Lease, []string, error) {
	return s.LockSet(names).TryLockMany(ctx)
}

// TryLockAll takes every named lock or none, in one request that the
// server applies atomically (owner key ""): a job that needs several
// resources together, without the deadlocks of taking them one by one.
// If one of them is held or waited for by someone else, it takes nothing
// and returns a *BusyError (matching ErrLockBusy) naming the first such
// lock and its holder. The leases are in the order of names.
func (s *Session) TryLockAll(ctx context.Context, names ...string) ([]*Lease, error) {
	return s.LockSet(names).TryLockAll(ctx)
}

// LockAll takes every named lock (owner key ""), waiting as long as it
// takes, and returns the leases in the order of names; or it takes none.
// It first tries them all at once (TryLockAll: one request, atomic). If
// one is busy it takes them one at a time in name order, each waiting in
// its FIFO queue: every LockAll takes a set in the same order, so two
// cannot deadlock each other (a Mutex.Lock of the same names in another
// order still can). If ctx ends or a lock cannot be taken, it releases
// what it took and returns the error, so the session holds none of them.
func (s *Session) LockAll(ctx context.Context, names ...string) ([]*Lease, error) {
	return s.LockSet(names).LockAll(ctx)
}

// LockSet is a handle on several exclusive locks of one session taken
// together: TryLockMany (each on its own), TryLockAll and LockAll (all or
// none), as the Session methods of those names do. Its options apply to
// every hold it takes: WithOwnerKey, WithHoldLimit (each hold gets the
// limit and the library renews each, unless WithManualRenewal).
type LockSet struct {
	s     *Session
	names []string
	cfg   holdConfig
	// err is why no request of the set can be sent; each returns it.
	err error
}

// LockSet returns a handle on the locks names (copied) for this session.
// Nothing is sent until they are locked. Names or options that no member
// would accept (each name as for Mutex, none twice, at most 1000 of them),
// or WithMaxReaders, which a LockSet does not take, make every method
// fail at once with an error matching ErrInvalidArgument, sending
// nothing; no names at all take nothing.
func (s *Session) LockSet(names []string, opts ...HoldOption) *LockSet {
	ls := &LockSet{s: s, names: slices.Clone(names), cfg: newHoldConfig(opts)}
	var nameErr error
	if len(names) > 0 {
		nameErr = rules.CheckLockNames(names)
	}
	ls.err = cmp.Or(invalid(nameErr), ls.cfg.check("LockSet"))
	return ls
}

// Names are the set's lock names, in order.
func (ls *LockSet) Names() []string { return slices.Clone(ls.names) }

func (ls *LockSet) request(all bool) *batonpb.AcquireManyRequest {
	req := &batonpb.AcquireManyRequest{Names: ls.names, OwnerKey: ls.cfg.ownerKey, All: all}
	if ls.cfg.holdLimit != 0 {
		req.HoldLimit = durationpb.New(ls.cfg.holdLimit)
	}
	return req
}

// TryLockMany is Session.TryLockMany with the set's options.
func (ls *LockSet) TryLockMany(ctx context.Context) ([]*Lease, []string, error) {
	leases, busy, _, err := ls.tryMany(ctx, ls.request(false))
	return leases, busy, err
}

// TryLockAll is Session.TryLockAll with the set's options.
func (ls *LockSet) TryLockAll(ctx context.Context) ([]*Lease, error) {
	leases, busy, holders, err := ls.tryMany(ctx, ls.request(true))
	if err != nil {
		return nil, err
	}
	if len(busy) > 0 {
		// All or none: some granted beside a busy one only when this
		// answer is a retry's, and a hold the first attempt got has
		// ended since (BUSY without a holder). Give the others back.
		ls.s.mu.Lock()
		for _, l := range leases {
			_, _ = ls.s.releaseLocked(l)
		}
		ls.s.mu.Unlock()
		return nil, &BusyError{Name: busy[0], Holder: holders[0]}
	}
	return leases, nil
}

// LockAll is Session.LockAll with the set's options.
func (ls *LockSet) LockAll(ctx context.Context) ([]*Lease, error) {
	s, names := ls.s, ls.names
	leases, err := ls.TryLockAll(ctx)
	if err == nil || !errors.Is(err, ErrLockBusy) {
		return leases, err
	}
	ordered := slices.Clone(names)
	slices.Sort(ordered)
	got := make(map[string]*Lease, len(names))
	for _, n := range ordered {
		l, err := s.mutex(n, ls.cfg, "LockSet").Lock(ctx)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
			for _, l := range got {
				_ = l.Release(rctx)
			}
			cancel()
			return nil, err
		}
		got[n] = l
	}
	out := make([]*Lease, len(names))
	for i, n := range names {
		out[i] = got[n]
	}
	return out, nil
}

// tryMany sends req and turns its answer into leases, and the names not
// granted with their holders (the zero Holder for a lock an all-or-nothing
// request skipped).
func (ls *LockSet) tryMany(ctx context.Context, req *batonpb.AcquireManyRequest) ([]*Lease, []string, []Holder, error) {
	s := ls.s
	if len(req.Names) == 0 {
		return nil, nil, nil, nil
	}
	if ls.err != nil {
		return nil, nil, nil, ls.err
	}
	c, err := s.do(ctx, &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_AcquireMany{AcquireMany: req}}, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	var leases []*Lease
	var busy []string
	var holders []Holder
	results := c.resp.GetAcquireMany().GetResults()
	for i, r := range results {
		if r.GetSkipped() {
			continue
		}
		if !r.GetAcquired() {
			busy = append(busy, r.GetName())
			holders = append(holders, holderOf(r.GetHolder()))
			continue
		}
		l, err := s.newLease(ctx, r.GetName(), r.GetToken(), ls.cfg, c.started)
		if err != nil {
			// Give back what this call got; the session retries the
			// releases in the background.
			s.mu.Lock()
			for _, l := range leases {
				_, _ = s.releaseLocked(l)
			}
			for _, r := range results[i+1:] {
				if r.GetAcquired() {
					_, _ = s.startLocked(releaseRequest(r.GetName(), req.OwnerKey, r.GetToken()), true)
				}
			}
			s.mu.Unlock()
			return nil, nil, nil, err
		}
		leases = append(leases, l)
	}
	return leases, busy, holders, nil
}
