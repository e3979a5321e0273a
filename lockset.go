package baton

// Several locks of one session taken together: TryLockMany (each on its
// own), TryLockAll and LockAll (all or none), and LockSet, the handle
// that gives them options.

import (
	"cmp"
	"context"
	"errors"
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

// LockSet is a handle on several exclusive locks of one session taken
// together: TryLockMany (each on its own), TryLockAll and LockAll (all or
// none), as the Session methods of those names do. Its options apply to
// every hold it takes: WithOwnerKey, WithLockDelay, WithHoldLimit (each hold gets the
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
	req.LockDelay = ls.cfg.lockDelayField()
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
