package sim

import (
	"fmt"
	"slices"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// checkDeadlock is checker i: an Acquire of the replayed log that the
// state machine refused with DEADLOCK was one. locks is the state before
// the entry, cmd the acquire, res its result. The refusal's cycle must
// hold in that state (each edge's waiter waits for its lock, the refused
// acquire's wait at the tail; its blocker holds the lock, or waits ahead
// of it; each edge's blocker the next edge's waiter, the last an earlier
// one's), and its waiters must be deadlocked with the acquire queued.
// The deadlocked set is found as the greatest set of waiting (session,
// owner key)s none of whose waits the machine would grant (the head of
// a queue, when it fits beside the holders left and its waiter holds the
// lock under no other acquire) while everyone outside the set let go of
// all it holds and waits for: start from every waiter, drop each one a
// grant would reach, until none is dropped. (A cycle alone proves
// nothing for a semaphore: every permit holder must be stuck.)
func checkDeadlock(locks []*fsmpb.Lock, cmd *fsmpb.Command, res *fsmpb.Result) error {
	type node struct {
		session uint64
		key     string
	}
	op := cmd.GetAcquire()
	self := node{cmd.GetSessionId(), op.GetOwnerKey()}
	cycle := res.GetDeadlock().GetEdges()
	if len(cycle) == 0 || (node{cycle[0].GetSessionId(), cycle[0].GetOwnerKey()}) != self || cycle[0].GetLock() != op.GetLock() {
		return fmt.Errorf("the cycle %v does not start with the refused wait", cycle)
	}
	inSet := map[node]bool{}
	for _, e := range cycle {
		inSet[node{e.GetSessionId(), e.GetOwnerKey()}] = true
	}
	byName := map[string]*fsmpb.Lock{}
	for _, l := range locks {
		byName[l.GetName()] = l
	}
	waiterOf := func(w *fsmpb.Waiter) node { return node{w.GetSessionId(), w.GetOwnerKey()} }
	holderOf := func(h *fsmpb.Holder) node { return node{h.GetSessionId(), h.GetOwnerKey()} }
	for i, e := range cycle {
		n, blocker := node{e.GetSessionId(), e.GetOwnerKey()}, node{e.GetBlockerSessionId(), e.GetBlockerOwnerKey()}
		if i+1 < len(cycle) && blocker != (node{cycle[i+1].GetSessionId(), cycle[i+1].GetOwnerKey()}) || !inSet[blocker] {
			return fmt.Errorf("edge %d (%v) is blocked by %v, not the next edge's waiter", i, e, blocker)
		}
		l := byName[e.GetLock()]
		ws := l.GetWaiters()
		ok := false
		for p := range len(ws) + 1 {
			switch {
			case p == len(ws) && i > 0, p < len(ws) && waiterOf(ws[p]) != n:
				continue // not n's wait (the tail is the refused one's)
			case e.GetQueuedAhead():
				ok = ok || slices.ContainsFunc(ws[:p], func(w *fsmpb.Waiter) bool { return waiterOf(w) == blocker })
			default:
				ok = ok || slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool { return holderOf(h) == blocker })
			}
		}
		if !ok {
			return fmt.Errorf("edge %d (%v) does not hold before the entry", i, e)
		}
	}
	type entry struct {
		n      node
		shared bool
	}
	stuck := map[node]bool{self: true}
	for _, l := range locks {
		for _, w := range l.GetWaiters() {
			stuck[waiterOf(w)] = true
		}
	}
	limit := func(name string) int {
		if l := byName[name]; l != nil {
			return int(max(l.GetLimit(), 1))
		}
		return int(max(op.GetLimit(), 1))
	}
	names := []string{op.GetLock()}
	for _, l := range locks {
		if l.GetName() != op.GetLock() {
			names = append(names, l.GetName())
		}
	}
	for dropped := true; dropped; {
		dropped = false
		for _, name := range names {
			var hs []entry
			var head *entry
			if l := byName[name]; l != nil {
				for _, h := range l.GetHolders() {
					if stuck[holderOf(h)] {
						hs = append(hs, entry{holderOf(h), h.GetShared()})
					}
				}
				for _, w := range l.GetWaiters() {
					if stuck[waiterOf(w)] {
						head = &entry{waiterOf(w), w.GetShared()}
						break
					}
				}
			}
			if head == nil && name == op.GetLock() && stuck[self] {
				head = &entry{self, op.GetShared()}
			}
			if head == nil {
				continue
			}
			fits := len(hs) == 0 || head.shared && len(hs) < limit(name) && !slices.ContainsFunc(hs, func(h entry) bool { return !h.shared })
			if fits && !slices.ContainsFunc(hs, func(h entry) bool { return h.n == head.n }) {
				delete(stuck, head.n)
				dropped = true
			}
		}
	}
	for _, e := range cycle {
		if n := (node{e.GetSessionId(), e.GetOwnerKey()}); !stuck[n] {
			return fmt.Errorf("%v, named in the cycle %v, is not deadlocked: a wait of its would be granted", n, cycle)
		}
	}
	return nil
}

// checkDeadlockEnd is checker i for a wait that an entry ended with
// DEADLOCK without a new wait (from log version 14: a grant or cancel
// left its node deadlocked). before and after are the locks before and
// after the entry, e the ended wait. The wait was queued before the
// entry, and its node waits for nothing after it (every wait of a
// deadlocked node ends); the cycle starts with it and holds in the state
// before the entry, but for the holds the entry itself granted, which
// closed it: each edge's waiter waited for its lock before the entry;
// its blocker was queued ahead of it then, or holds the lock before or
// after the entry; each blocker is the next edge's waiter, the last an
// earlier one's.
func checkDeadlockEnd(before, after []*fsmpb.Lock, e *fsmpb.WaitEnded) error {
	type node struct {
		session uint64
		key     string
	}
	byName := map[string]*fsmpb.Lock{}
	for _, l := range before {
		byName[l.GetName()] = l
	}
	afterByName := map[string]*fsmpb.Lock{}
	for _, l := range after {
		afterByName[l.GetName()] = l
		for _, w := range l.GetWaiters() {
			if w.GetSessionId() == e.GetSessionId() && w.GetAcquireSeq() == e.GetAcquireSeq() {
				return fmt.Errorf("the wait is still queued for %s after the entry", l.GetName())
			}
		}
	}
	var self node
	found := false
	for _, w := range byName[e.GetLock()].GetWaiters() {
		if w.GetSessionId() == e.GetSessionId() && w.GetAcquireSeq() == e.GetAcquireSeq() {
			self, found = node{w.GetSessionId(), w.GetOwnerKey()}, true
		}
	}
	if !found {
		return fmt.Errorf("the wait was not queued for %s before the entry", e.GetLock())
	}
	for _, l := range after {
		for _, w := range l.GetWaiters() {
			if (node{w.GetSessionId(), w.GetOwnerKey()}) == self {
				return fmt.Errorf("its node %v still waits for %s after the entry", self, l.GetName())
			}
		}
	}
	cycle := e.GetDeadlock().GetEdges()
	if len(cycle) == 0 || (node{cycle[0].GetSessionId(), cycle[0].GetOwnerKey()}) != self || cycle[0].GetLock() != e.GetLock() {
		return fmt.Errorf("the cycle %v does not start with the ended wait", cycle)
	}
	var nodes []node
	for _, c := range cycle {
		nodes = append(nodes, node{c.GetSessionId(), c.GetOwnerKey()})
	}
	holds := func(l *fsmpb.Lock, n node) bool {
		return slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool { return node{h.GetSessionId(), h.GetOwnerKey()} == n })
	}
	for i, c := range cycle {
		n, blocker := nodes[i], node{c.GetBlockerSessionId(), c.GetBlockerOwnerKey()}
		if i+1 < len(cycle) && blocker != nodes[i+1] || !slices.Contains(nodes, blocker) {
			return fmt.Errorf("edge %d (%v) is blocked by %v, not the next edge's waiter", i, c, blocker)
		}
		ws := byName[c.GetLock()].GetWaiters()
		ok := false
		for p, w := range ws {
			if (node{w.GetSessionId(), w.GetOwnerKey()}) != n {
				continue
			}
			if c.GetQueuedAhead() {
				ok = ok || slices.ContainsFunc(ws[:p], func(x *fsmpb.Waiter) bool { return node{x.GetSessionId(), x.GetOwnerKey()} == blocker })
			} else {
				ok = ok || holds(byName[c.GetLock()], blocker) || holds(afterByName[c.GetLock()], blocker)
			}
		}
		if !ok {
			return fmt.Errorf("edge %d (%v) does not hold before the entry", i, c)
		}
	}
	return nil
}
