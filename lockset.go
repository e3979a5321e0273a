package baton

// Several locks of one session taken together: TryLockMany (each on its
// own), TryLockAll and LockAll (all or none), and LockSet, the handle
// that gives them options and mixes modes (LockSetOf).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

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

// LockSet is a handle on several locks of one session taken together:
// TryLockMany (each on its own), TryLockAll and LockAll (all or none), as
// the Session methods of those names do. Session.LockSet makes one of
// mutexes; Session.LockSetOf one of any handles: mutexes, semaphore
// permits, and readers and writers of read/write locks, each taken in its
// own mode. Its options apply to every hold it takes: WithOwnerKey,
// WithLockDelay, WithHoldLimit (each hold gets the limit and the library
// renews each, unless WithManualRenewal).
type LockSet struct {
	s     *Session
	names []string
	// members are the locks in the order of names, each a handle in its
	// mode (shared and limit) with the set's options.
	members []*Mutex
	cfg     holdConfig
	// mixed: the members are not all in one mode, so a request gives
	// each its own (AcquireManyRequest.modes).
	mixed bool
	// err is why no request of the set can be sent; each returns it.
	err error
}

// LockSet returns a handle on the mutexes names (copied) for this
// session. Nothing is sent until they are locked. Names or options that
// no member would accept (each name as for Mutex, none twice, at most
// 1000 of them), or WithMaxReaders, which a LockSet does not take, make
// every method fail at once with an error matching ErrInvalidArgument,
// sending nothing; no names at all take nothing.
func (s *Session) LockSet(names []string, opts ...HoldOption) *LockSet {
	ls := &LockSet{s: s, names: slices.Clone(names), cfg: newHoldConfig(opts)}
	var nameErr error
	if len(names) > 0 {
		nameErr = rules.CheckLockNames(names)
	}
	ls.err = cmp.Or(invalid(nameErr), ls.cfg.check("LockSet"))
	for _, n := range names {
		ls.members = append(ls.members, s.mutex(n, ls.cfg, "LockSet"))
	}
	return ls
}

// A LockSetMember is one hold of a LockSet made by Session.LockSetOf: a
// *Mutex, a *Semaphore (one of its permits), or RWMutex.Reader or
// RWMutex.Writer (a read or the write hold of a read/write lock).
type LockSetMember interface {
	// lockSetMember is the member's lock in its mode, or why the handle
	// can take nothing.
	lockSetMember() (*Mutex, error)
}

func (m *Mutex) lockSetMember() (*Mutex, error) { return m, m.err }

func (sem *Semaphore) lockSetMember() (*Mutex, error) { return &sem.m, cmp.Or(sem.err, sem.m.err) }

// rwHold is one side of an RWMutex as a LockSetMember.
type rwHold struct {
	rw   *RWMutex
	read bool
}

func (h rwHold) lockSetMember() (*Mutex, error) {
	if h.read {
		return &h.rw.r, cmp.Or(h.rw.err, h.rw.r.err)
	}
	return &h.rw.w, cmp.Or(h.rw.err, h.rw.w.err)
}

// Reader is the lock as one of its readers, for Session.LockSetOf.
func (rw *RWMutex) Reader() LockSetMember { return rwHold{rw, true} }

// Writer is the lock as its one writer, for Session.LockSetOf.
func (rw *RWMutex) Writer() LockSetMember { return rwHold{rw, false} }

// LockSetOf returns a handle on the locks of members, each taken in its
// own mode: a Mutex alone, a Semaphore's permit beside the other
// holders of its permits, an RWMutex's Reader beside other readers, its
// Writer alone. All or none of them, in one request the server applies
// atomically (TryLockAll), or waiting as LockAll does; the leases come in
// the order of members. Nothing is sent until they are locked.
//
// One request takes every hold, so the handles must belong to this
// session and state the same owner key, hold limit, manual renewal and
// lock-delay (their options), which are the set's; and name each lock
// once: a semaphore or read/write lock stated twice (with the same
// number of permits or another) is refused, as is a nil member. Members
// that break these rules, or that their own handle would refuse, make
// every method fail at once with an error matching ErrInvalidArgument
// that names them, sending nothing. A set whose members are not all in
// one mode needs a cluster of log version 7 (a member of an older
// release refuses it).
func (s *Session) LockSetOf(members ...LockSetMember) *LockSet {
	ls := &LockSet{s: s}
	seen := make(map[string]int, len(members))
	for i, mb := range members {
		if mb == nil {
			ls.err = cmp.Or(ls.err, fmt.Errorf("%w: lock set member %d of %d is nil", ErrInvalidArgument, i+1, len(members)))
			continue
		}
		m, err := mb.lockSetMember()
		if len(ls.members) == 0 {
			ls.cfg = m.hold
			ls.cfg.maxReaders, ls.cfg.readersSet = 0, false
		}
		switch j, dup := seen[m.name]; {
		case err != nil:
			err = fmt.Errorf("lock set member %d of %d (%s): %w", i+1, len(members), m.describe(), err)
		case m.s != s:
			err = fmt.Errorf("%w: lock set member %d of %d (%s) is a handle of session %d, not of this session %d",
				ErrInvalidArgument, i+1, len(members), m.describe(), m.s.ID(), s.ID())
		case dup:
			err = fmt.Errorf("%w: lock set names %q twice: members %d (%s) and %d (%s)",
				ErrInvalidArgument, m.name, j+1, ls.members[j].describe(), i+1, m.describe())
		case !m.hold.sameHold(ls.cfg):
			err = fmt.Errorf("%w: lock set member %d of %d (%s) states other hold options (owner key, hold limit, manual renewal or lock-delay) than member 1 (%s); one request takes them all",
				ErrInvalidArgument, i+1, len(members), m.describe(), ls.members[0].describe())
		}
		ls.err = cmp.Or(ls.err, err)
		seen[m.name] = len(ls.members)
		ls.names = append(ls.names, m.name)
		ls.members = append(ls.members, m)
		ls.mixed = ls.mixed || m.shared != ls.members[0].shared || max(m.limit, 1) != max(ls.members[0].limit, 1)
	}
	if ls.err == nil && len(ls.names) > 0 {
		ls.err = invalid(rules.CheckLockNames(ls.names))
	}
	return ls
}

// describe says what the handle holds, for errors: "mutex a", "a permit
// of semaphore p (3 permits)", "a read of read/write lock r (8 readers)".
func (m *Mutex) describe() string {
	switch {
	case m.kind == "RWMutex" && m.shared:
		return fmt.Sprintf("a read of read/write lock %q (%d readers)", m.name, m.limit)
	case m.kind == "RWMutex":
		return fmt.Sprintf("the write of read/write lock %q (%d readers)", m.name, m.limit)
	case m.kind == "Semaphore":
		return fmt.Sprintf("a permit of semaphore %q (%d permits)", m.name, m.limit)
	}
	return fmt.Sprintf("mutex %q", m.name)
}

// Names are the set's lock names, in order.
func (ls *LockSet) Names() []string { return slices.Clone(ls.names) }

func (ls *LockSet) request(all bool) *batonpb.AcquireManyRequest {
	req := &batonpb.AcquireManyRequest{Names: ls.names, OwnerKey: ls.cfg.ownerKey, All: all}
	switch {
	case ls.mixed:
		req.Modes = make([]*batonpb.LockMode, len(ls.members))
		for i, m := range ls.members {
			req.Modes[i] = &batonpb.LockMode{Shared: m.shared, Limit: m.limit}
		}
	case len(ls.members) > 0:
		req.Shared, req.Limit = ls.members[0].shared, ls.members[0].limit
	}
	if ls.cfg.holdLimit != 0 {
		req.HoldLimit = durationpb.New(ls.cfg.holdLimit)
	}
	req.LockDelay = ls.cfg.lockDelayField()
	return req
}

// TryLockMany is Session.TryLockMany with the set's options and modes.
func (ls *LockSet) TryLockMany(ctx context.Context) ([]*Lease, []string, error) {
	leases, busy, _, err := ls.tryMany(ctx, ls.request(false))
	return leases, busy, err
}

// TryLockAll is Session.TryLockAll with the set's options and modes: a
// busy member (a mutex or writer held, a semaphore with no free permit,
// a reader behind a writer) makes it take nothing.
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

// LockAll is Session.LockAll with the set's options and modes: it tries
// the whole set at once and, if a lock is busy, takes the members one at
// a time in name order, each in its mode, waiting in its lock's FIFO
// queue. Every LockAll orders its locks so, whatever their modes, so two
// cannot deadlock each other. While it waits it may hold some members;
// it returns all of them or, when ctx ends or one cannot be taken, none.
func (ls *LockSet) LockAll(ctx context.Context) ([]*Lease, error) {
	names := ls.names
	leases, err := ls.TryLockAll(ctx)
	if err == nil || !errors.Is(err, ErrLockBusy) {
		return leases, err
	}
	ordered := slices.Clone(ls.members)
	slices.SortFunc(ordered, func(a, b *Mutex) int { return cmp.Compare(a.name, b.name) })
	got := make(map[string]*Lease, len(names))
	for _, m := range ordered {
		l, err := m.Lock(ctx)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
			for _, l := range got {
				_ = l.Release(rctx)
			}
			cancel()
			return nil, err
		}
		got[m.name] = l
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
		l, err := s.newLease(ctx, r.GetName(), r.GetToken(), ls.cfg, c.started, r.GetLockDelay().AsDuration(), r.GetSignedToken())
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
