package fsm

import (
	"slices"
	"strconv"
	"strings"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The cycle a deadlock refusal or a deadlocked wait's end names, found
// once the search has settled which nodes are free (deadlock.go).

// readDead readies the locks' queues for cycle: each lock's first
// waiter from its head whose node is deadlocked (len(queue): none), once
// per search, and the walk's reading of each queue from its head again.
func (d *deadlockSearch) readDead() {
	for li := range d.locks {
		dl := &d.locks[li]
		if !d.deadKnown {
			dl.firstDead = len(dl.queue)
			for i := dl.head; i < len(dl.queue); i++ {
				if !d.nodes[dl.queue[i].node].free {
					dl.firstDead = i
					break
				}
			}
		}
		dl.read = dl.head
	}
	d.deadKnown = true
}

// cycle returns the deadlock that node self's wait start (a new wait,
// or one of its waits that a grant or cancel left deadlocked) closes:
// the shortest chain of blocking waits from it back to self (breadth
// first, in wait and holder order), or, if self is deadlocked on a
// deadlock that was there before (formed below the version that checks
// it), the chain from it into that deadlock, each node once, the last
// edge's blocker an earlier edge's waiter.
//
// What keeps a deadlocked node's wait from its grant, once settled, is
// the waiters ahead of it whose node is deadlocked (queued ahead) or, if
// none, the holders whose node is. The walk reads each queue once from
// its head: a wait further back has the waiters met before ahead of it
// too, and those are already found (or were self, and the walk ended),
// so reading them again, as a list per wait, made a refusal behind a
// queue of n deadlocked waiters cost O(n^3) (8 s at 4,000 on every
// member: BenchmarkRefuseBehindDeadlockedQueue).
func (d *deadlockSearch) cycle(self int32, start dlWait) []*fsmpb.DeadlockEdge {
	d.readDead()
	type step struct {
		from  int32 // the node before
		wait  dlWait
		ahead bool
	}
	prev := make(map[int32]step)
	edge := func(n int32, w dlWait, ahead bool, blocker int32) *fsmpb.DeadlockEdge {
		nd, bd := d.nodes[n].node, d.nodes[blocker].node
		return &fsmpb.DeadlockEdge{SessionId: nd.s.id, OwnerKey: nd.key, Lock: d.locks[w.lock].l.name, QueuedAhead: ahead,
			BlockerSessionId: bd.s.id, BlockerOwnerKey: bd.key}
	}
	// Breadth first from the new wait alone, then from each node
	// reached, through all of its waits.
	type visit struct {
		n     int32
		waits []dlWait
	}
	frontier := []visit{{self, []dlWait{start}}}
	var next []visit
	// meet reports whether blocker b of v's wait w is self, else adds
	// it to the next level if it is new.
	meet := func(v visit, w dlWait, ahead bool, b int32) bool {
		if b == self {
			return true
		}
		if _, seen := prev[b]; !seen {
			prev[b] = step{v.n, w, ahead}
			next = append(next, visit{b, d.nodes[b].waits})
		}
		return false
	}
	back := func(v visit, w dlWait, ahead bool) []*fsmpb.DeadlockEdge {
		out := []*fsmpb.DeadlockEdge{edge(v.n, w, ahead, self)}
		for n := v.n; n != self; {
			p := prev[n]
			out = append(out, edge(p.from, p.wait, p.ahead, n))
			n = p.from
		}
		slices.Reverse(out)
		return out
	}
	for len(frontier) > 0 {
		next = nil
		for _, v := range frontier {
			for _, w := range v.waits {
				dl := &d.locks[w.lock]
				if dl.firstDead < int(w.pos) {
					for ; dl.read < int(w.pos); dl.read++ {
						d.cycleRead++
						if b := dl.queue[dl.read].node; !d.nodes[b].free && meet(v, w, true, b) {
							return back(v, w, true)
						}
					}
					continue
				}
				for _, b := range dl.holders {
					if !d.nodes[b].free && meet(v, w, false, b) {
						return back(v, w, false)
					}
				}
			}
		}
		frontier = next
	}
	// No way back to self: walk from it along first blockers to a node
	// met before.
	var out []*fsmpb.DeadlockEdge
	seen := map[int32]bool{}
	for n, w := self, start; !seen[n]; {
		// Every wait of a deadlocked node has a deadlocked blocker.
		seen[n] = true
		b, ahead := d.firstBlocker(w)
		out = append(out, edge(n, w, ahead, b))
		n = b
		w = d.nodes[n].waits[0]
	}
	return out
}

// firstBlocker is the first of what keeps wait w of a deadlocked node
// from its grant (see cycle), and whether it is queued ahead of w.
func (d *deadlockSearch) firstBlocker(w dlWait) (int32, bool) {
	dl := &d.locks[w.lock]
	if dl.firstDead < int(w.pos) {
		return dl.queue[dl.firstDead].node, true
	}
	i := slices.IndexFunc(dl.holders, func(n int32) bool { return !d.nodes[n].free })
	return dl.holders[i], false
}

// DescribeCycle is the message of a DEADLOCK refusal or wait end that
// names cycle: one line naming each wait.
func DescribeCycle(cycle []*fsmpb.DeadlockEdge) string { return describeCycle(cycle) }

// describeCycle is the refusal's message: one line naming each wait.
func describeCycle(cycle []*fsmpb.DeadlockEdge) string {
	var b strings.Builder
	b.WriteString("deadlock: ")
	for i, e := range cycle {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(nodeName(e.GetSessionId(), e.GetOwnerKey()) + " waits for lock " + quote(e.GetLock()))
		if e.GetQueuedAhead() {
			b.WriteString(" behind ")
		} else {
			b.WriteString(" held by ")
		}
		b.WriteString(nodeName(e.GetBlockerSessionId(), e.GetBlockerOwnerKey()))
	}
	return b.String()
}

// nodeName names a holder: "session 7", or "session 7 key \"k\"".
func nodeName(session uint64, key string) string {
	if key == "" {
		return "session " + strconv.FormatUint(session, 10)
	}
	return "session " + strconv.FormatUint(session, 10) + " key " + quote(key)
}
