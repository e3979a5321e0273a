package fsm

import (
	"math"
	"slices"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Deadlocks that form without a new wait. From log version 14
// (DeadlockAtGrantVersion) an entry that grants a lock to a node that
// still waits for another, or cancels one wait of a node that has
// others, searches from that node once the entry is done, and ends
// every wait of it that is now deadlocked with ERROR_DEADLOCK and its
// cycle, as a cancel or a timeout ends a wait (waits_ended, the
// acquire's cached result). Below it such waits hang until their
// callers give up, so an older log replays the same.
//
// Where a deadlock can form (the model is deadlock.go's: a node is free
// if it does not wait, or if one of its waits would be granted once the
// free nodes have let go). An entry changes the graph in these ways:
//
//   - A hold ends, or a waiter leaves a queue because its node stops
//     waiting (its session ended or was blacklisted): the lock has more
//     room, the waiters behind move up. Every condition of the fixpoint
//     is easier to meet, so no free node becomes deadlocked.
//   - A new wait is queued at a lock's tail: its Acquire is refused if
//     its node would be deadlocked (refuseDeadlock). No one waits behind
//     it, and its node, free, counts for nothing as a holder, so no
//     other node changes.
//   - A hold is granted at once (Acquire, AcquireMany) to a node that
//     waits elsewhere: only a lock with no queue grants at once, so no
//     one waits for that hold yet; a later wait for it is an acquire,
//     checked as above.
//   - A queued wait of node n is granted while n has other waits, or is
//     cancelled (CancelWait: its timeout, or one of the goroutines that
//     share the key gave up) while n has others. Here n loses a wait
//     that made it free, and for a grant gains a hold that others wait
//     for: n, and whoever waits on n, may now be deadlocked. These are
//     the only changes that can make a free node deadlocked.
//
// Before such an entry n was free: the granted wait was the head of its
// queue and fitted beside the holders, which the fixpoint only makes
// easier. If n is still free after it, every other node is as free as
// before (n's hold and waits count for nothing in the fixpoint, as
// before). If n is deadlocked, ending all of n's waits leaves n waiting
// for nothing, so free again, and with it every node that was free
// before the entry. So the search starts from each such n alone, and
// ends n's waits only: no other node needs to lose a wait. Ending them
// may let the waiters behind them in (the queue moved up), and those
// grants are checked in turn, until none is left; each round ends
// waits, so it stops.
//
// A node never comes to wait for a hold of its own: when one of its
// waits for a lock is granted, its other waits for that lock re-enter the
// new hold in the same entry (reenterWaits), as an acquire made then
// would. Only a wait that could not re-enter (another mode, hold limit or
// lock-delay: an acquire made then would be refused) stays behind its
// node's own hold; the node is deadlocked by the definition, and that
// wait ends here.
//
// The search is findDeadlock's, bounded by MaxDeadlockSearch: a node
// whose search needs more keeps its waits. The nodes are searched in
// the order the entry granted or cancelled their waits, every member
// alike.

// DeadlockAtGrantVersion is the log version from which a grant or a
// cancel that leaves a waiting node deadlocked ends that node's waits
// with ERROR_DEADLOCK (endStalled); below it they stay queued.
const DeadlockAtGrantVersion = 14

// StalledSearchBoundVersion is the log version from which one entry
// runs at most MaxStalledSearches searches from the nodes it left
// waiting (endStalled); below it it searches from every one.
const StalledSearchBoundVersion = 15

// MaxStalledSearches is how many nodes one entry searches from after
// its grants and cancels, in the order it recorded them; each search
// looks at no more than MaxDeadlockSearch holds and waits. A node past
// it keeps its waits, as one whose search gives up does: the bound is
// on the cost of an entry, which every member applies on its Raft
// loop. (A release that grants a run of thousands of readers, each
// also queued behind a holder that waits, would otherwise search from
// each, reading the queue ahead of it: seconds of apply.) A node that
// waitsBehindFree shows free costs no search and does not count.
const MaxStalledSearches = 16

// stalledWait is one wait of a deadlocked node and the cycle it closes.
type stalledWait struct {
	lock  *lock
	seq   uint64
	cycle []*fsmpb.DeadlockEdge
}

// mayStall records that node (s, key) lost a wait this entry while it
// may still wait for others, for endStalled to search once the entry is
// done. Below DeadlockAtGrantVersion it records nothing.
func (m *Machine) mayStall(a *apply, s *session, key string) {
	if m.LogVersion() < DeadlockAtGrantVersion || len(s.waits) == 0 {
		return
	}
	n := dlNode{s, key}
	if len(a.stalled) < 16 {
		if !slices.Contains(a.stalled, n) {
			a.stalled = append(a.stalled, n)
		}
		return
	}
	// An entry that grants a run of readers may record thousands: a set,
	// not a scan of those so far for each.
	if a.stalledSet == nil {
		a.stalledSet = make(map[dlNode]struct{}, 2*len(a.stalled))
		for _, x := range a.stalled {
			a.stalledSet[x] = struct{}{}
		}
	}
	if _, ok := a.stalledSet[n]; !ok {
		a.stalledSet[n] = struct{}{}
		a.stalled = append(a.stalled, n)
	}
}

// endStalled searches from every node mayStall recorded, in order, and
// ends the waits of each that is deadlocked; the grants that follows
// may record more.
func (m *Machine) endStalled(a *apply) {
	bounded := m.LogVersion() >= StalledSearchBoundVersion
	searches := 0
	for i := 0; i < len(a.stalled); i++ {
		n := a.stalled[i]
		if m.sessions[n.s.id] != n.s {
			continue // its session ended later in the entry
		}
		var ws []stalledWait
		switch {
		case m.waitsBehindFree(n.s):
		case bounded && searches == MaxStalledSearches:
			if m.skippedStalled != nil {
				m.skippedStalled(n.s.id, n.key)
			}
			continue
		default:
			searches++
			ws = findStalled(m, n)
		}
		if m.searchedStalled != nil {
			m.searchedStalled(n.s.id, n.key, ws)
		}
		m.endWaits(a, n, ws)
	}
	a.stalled, a.stalledSet = nil, nil
}

// waitsBehindFree reports, when it can tell cheaply, whether each wait of
// s is for a lock whose holders' sessions wait for nothing
// (holdersIdle): then every node of s that waits is free, and
// findStalled would find nothing. A fleet queued on a lock whose holder
// waits for nothing else is the usual case, and a search from each node
// a run of grants leaves waiting in such a queue would read the queue
// ahead of it, O(queue) each. It gives up (false: search) past a few
// holders.
func (m *Machine) waitsBehindFree(s *session) bool {
	budget := idleBudget
	for k := range s.waits {
		if budget--; !m.locks[k.lock].holdersIdle(&budget) {
			return false
		}
	}
	return true
}

// holdersIdle reports whether every holder of l is of a session that
// waits for nothing, looking at no more than *budget holders (false past
// it). Then each waiter of l, and a wait queued at its tail, is free:
// those holders are free nodes, so every waiter would be granted in
// turn, from the head, once they let go (a waiter's node is none of
// them: its session waits). The deadlock search would find nothing.
func (l *lock) holdersIdle(budget *int) bool {
	if *budget -= len(l.holders); *budget < 0 {
		return false
	}
	return l.holdersWaitForNothing()
}

// holdersWaitForNothing reports whether no holder of l is of a session
// that waits (holdersIdle, without a bound: findDeadlock asks it before
// a search that would read the holders anyway).
func (l *lock) holdersWaitForNothing() bool {
	return !slices.ContainsFunc(l.holders, func(h holder) bool { return len(h.s.waits) > 0 })
}

// idleBudget is how many holders (and waits) waitsBehindFree looks at
// before it leaves it to the search.
const idleBudget = 64

// findStalled returns the waits of node n, in acquire seq order, each
// with the cycle it closes, if n waits and is deadlocked as the state
// stands; nil if n is free or the search hit MaxDeadlockSearch.
func findStalled(m *Machine, n dlNode) []stalledWait {
	d := &m.deadlocks
	d.reset(m)
	defer d.done()
	self := d.node(n)
	for i := self; int(i) < len(d.nodes); i++ {
		if !d.readWaits(i) {
			return nil
		}
	}
	if len(d.nodes[self].waits) == 0 {
		return nil
	}
	d.settle()
	if d.nodes[self].free {
		return nil
	}
	var out []stalledWait
	for _, w := range d.nodes[self].waits {
		dl := &d.locks[w.lock]
		out = append(out, stalledWait{lock: dl.l, seq: dl.l.waiters()[w.pos].acquireSeq, cycle: d.cycle(self, w)})
	}
	return out
}

// endWaits ends the waits ws of node n with ERROR_DEADLOCK, as
// cancelWait ends one: out of the queue, reported in waits_ended with
// its cycle, its acquire's cached result a DEADLOCK refusal naming the
// cycle; then each lock goes on to the waiters behind.
func (m *Machine) endWaits(a *apply, n dlNode, ws []stalledWait) {
	var locks []*lock
	for _, w := range ws {
		l := w.lock
		m.changeLock(l)
		l.removeWaiter(n.s, w.seq)
		n.s.dropWait(waitKey{l.name, w.seq})
		m.changeSession(n.s)
		n.s.waitDeadlocked(w.seq, l.name, w.cycle)
		a.res.WaitsEnded = append(a.res.WaitsEnded, &fsmpb.WaitEnded{
			SessionId:  n.s.id,
			AcquireSeq: w.seq,
			Lock:       l.name,
			Error:      fsmpb.Error_ERROR_DEADLOCK,
			Deadlock:   &fsmpb.DeadlockCycle{Edges: w.cycle},
		})
		if !slices.Contains(locks, l) {
			locks = append(locks, l)
		}
	}
	for _, l := range locks {
		m.grantWaiters(a, l)
	}
}

// waitDeadlocked updates the cached result of the queued acquire seq, if
// it is still cached, to the DEADLOCK refusal a retry learns: the
// message and cycle an acquire refused at once would have had.
func (s *session) waitDeadlocked(seq uint64, lock string, cycle []*fsmpb.DeadlockEdge) {
	c := s.cachedEntry(seq)
	if c == nil || !c.acquireIs(lock, fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED) {
		return
	}
	r := cacheResult(seq, &fsmpb.Result{Error: fsmpb.Error_ERROR_DEADLOCK, Message: describeCycle(cycle),
		Deadlock: &fsmpb.DeadlockCycle{Edges: cycle}})
	r.claimed = c.claimed
	*c = r
}

// reenterWaits grants the other waits of node (s, key) for l, wherever
// they are queued, as re-entries of the hold of l this entry just granted
// it (count + 1 each, its token), from log version 14
// (DeadlockAtGrantVersion): an acquire of that node made now would
// re-enter at once, so one made a moment earlier must not wait for the
// node's own hold, nor be ended as deadlocked behind it. Below 14 such a
// wait stays queued until the node's hold ends. A wait that differs from
// the hold in mode, hold limit or lock-delay stays queued: an acquire
// made now would be refused (LIMIT_MISMATCH), and endStalled ends it as
// deadlocked behind its own node's hold.
func (m *Machine) reenterWaits(a *apply, l *lock, s *session, key string) {
	// The session's own waits first: a grant stays O(1) however long the
	// queue unless the session waits for l again, which is rare; in a
	// session with many waits, the node's own (keyWaits), whose other
	// keys' waits for l would not re-enter.
	again := false
	if s.keyWaits != nil {
		again = slices.ContainsFunc(s.keyWaits[key], func(k waitKey) bool { return k.lock == l.name })
	} else {
		for k := range s.waits {
			if k.lock == l.name {
				again = true
				break
			}
		}
	}
	if !again {
		return
	}
	h := l.holderOf(s, key)
	if h == nil {
		return
	}
	reenters := func(w *waiter) bool {
		return w.s == s && w.ownerKey == key && w.shared == h.shared &&
			w.holdLimit == h.holdLimit && w.lockDelay == h.lockDelay && h.count != math.MaxUint32
	}
	i := slices.IndexFunc(l.waiters(), func(w waiter) bool { return reenters(&w) })
	if i < 0 {
		return
	}
	h = m.changeHolder(l, h)
	// One pass from the first: the waits that re-enter leave the queue,
	// in queue order, and the others move up (not a scan and a shift
	// of the queue for each, when a node waits for l many times).
	ws := l.waiters()
	kept := i
	for ; i < len(ws); i++ {
		w := &ws[i]
		if !reenters(w) {
			ws[kept] = *w
			kept++
			continue
		}
		seq := w.acquireSeq
		h.count++
		l.dropValue(s, key, seq)
		s.dropWait(waitKey{l.name, seq})
		m.changeSession(s)
		s.granted(seq, l.name, h.token, h.count)
		a.res.Grants = append(a.res.Grants, &fsmpb.Grant{
			SessionId:  s.id,
			AcquireSeq: seq,
			Lock:       l.name,
			Token:      h.token,
			Shared:     h.shared,
			Reentry:    true,
		})
	}
	clear(ws[kept:])
	l.queue.waiters = ws[:kept]
}
