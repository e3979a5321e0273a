package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// refNode is a node of the reference search: a (session, owner key).
type refNode struct {
	session uint64
	key     string
}

// refDeadlocked is the reference for deadlock.go, written apart from it
// from the definition in docs/ARCHITECTURE.md, over the locks as the read
// API shows them: it returns the nodes that would be deadlocked with a
// new wait of node n for lock (shared or not, limit holders) queued at
// its tail. Whole-state passes to a fixpoint, no budget: a node is free
// if it waits for nothing, or if, with every free node's holds and waits
// taken away, the head of some queue it waits in is its own wait and fits
// beside the holders left (and its node holds that lock under no other
// acquire). Every other node is deadlocked. With lock "" there is no new
// wait: the nodes deadlocked as the state stands.
func refDeadlocked(locks []*fsmpb.Lock, n refNode, lock string, shared bool, limit uint32) map[refNode]bool {
	type hold struct {
		node   refNode
		shared bool
	}
	type lockCopy struct {
		limit   int
		holders []hold
		queue   []hold
	}
	all := map[string]*lockCopy{}
	waits := map[refNode]bool{}
	var names []string
	for _, l := range locks {
		c := &lockCopy{limit: int(max(l.GetLimit(), 1))}
		for _, h := range l.GetHolders() {
			c.holders = append(c.holders, hold{refNode{h.GetSessionId(), h.GetOwnerKey()}, h.GetShared()})
		}
		for _, w := range l.GetWaiters() {
			c.queue = append(c.queue, hold{refNode{w.GetSessionId(), w.GetOwnerKey()}, w.GetShared()})
			waits[refNode{w.GetSessionId(), w.GetOwnerKey()}] = true
		}
		all[l.GetName()] = c
		names = append(names, l.GetName())
	}
	if lock != "" {
		c := all[lock]
		if c == nil {
			c = &lockCopy{limit: int(max(limit, 1))}
			all[lock] = c
			names = append(names, lock)
		}
		c.queue = append(c.queue, hold{n, shared})
		waits[n] = true
	}
	free := func(x refNode) bool { return !waits[x] }
	freed := map[refNode]bool{}
	isFree := func(x refNode) bool { return free(x) || freed[x] }
	for changed := true; changed; {
		changed = false
		for _, name := range names {
			c := all[name]
			var holders []hold
			for _, h := range c.holders {
				if !isFree(h.node) {
					holders = append(holders, h)
				}
			}
			for _, w := range c.queue {
				if isFree(w.node) {
					continue // gone: cancelled by its free node
				}
				fits := len(holders) == 0 || w.shared && len(holders) < c.limit && !slices.ContainsFunc(holders, func(h hold) bool { return !h.shared })
				if !fits || slices.ContainsFunc(holders, func(h hold) bool { return h.node == w.node }) {
					break
				}
				freed[w.node] = true // granted, so free: it lets go at once
				changed = true
			}
		}
	}
	dead := map[refNode]bool{}
	for x := range waits {
		if !isFree(x) {
			dead[x] = true
		}
	}
	return dead
}

// refCycleLen is the number of edges of the shortest chain of blocking
// waits, in pre with dead deadlocked, from node self's new wait for lock
// back to self (0: there is none), as the refusal's cycle must be: a
// wait is blocked by the deadlocked nodes queued ahead of it or, if
// none, by the lock's deadlocked holders.
func refCycleLen(pre []*fsmpb.Lock, dead map[refNode]bool, self refNode, lock string) int {
	type refWait struct {
		l   *fsmpb.Lock
		pos int
	}
	waits := map[refNode][]refWait{}
	start := refWait{l: &fsmpb.Lock{}}
	for _, l := range pre {
		for p, w := range l.GetWaiters() {
			n := refNode{w.GetSessionId(), w.GetOwnerKey()}
			waits[n] = append(waits[n], refWait{l, p})
		}
		if l.GetName() == lock {
			start = refWait{l, len(l.GetWaiters())}
		}
	}
	blockers := func(w refWait) (bs []refNode) {
		for _, x := range w.l.GetWaiters()[:w.pos] {
			if n := (refNode{x.GetSessionId(), x.GetOwnerKey()}); dead[n] {
				bs = append(bs, n)
			}
		}
		if len(bs) > 0 {
			return bs
		}
		for _, h := range w.l.GetHolders() {
			if n := (refNode{h.GetSessionId(), h.GetOwnerKey()}); dead[n] {
				bs = append(bs, n)
			}
		}
		return bs
	}
	seen := map[refNode]bool{self: true}
	frontier := [][]refWait{{start}}
	for depth := 1; len(frontier) > 0; depth++ {
		var next [][]refWait
		for _, ws := range frontier {
			for _, w := range ws {
				for _, b := range blockers(w) {
					if b == self {
						return depth
					}
					if !seen[b] {
						seen[b] = true
						next = append(next, waits[b])
					}
				}
			}
		}
		frontier = next
	}
	return 0
}

// checkDeadlockDecision checks the machine's answer res to cmd, an
// Acquire with wait applied on the state whose locks were pre: a QUEUED
// answer must be no deadlock for the reference, a DEADLOCK one must be
// one, naming a cycle that holds in pre: the new wait first, each node
// waiting for its lock, held by the next node or queued ahead by it, and
// none shorter (refCycleLen).
func checkDeadlockDecision(t *testing.T, pre []*fsmpb.Lock, cmd *fsmpb.Command, res *fsmpb.Result) {
	t.Helper()
	op := cmd.GetAcquire()
	queued := res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED
	refused := res.GetError() == fsmpb.Error_ERROR_DEADLOCK
	if !queued && !refused {
		return
	}
	self := refNode{cmd.GetSessionId(), op.GetOwnerKey()}
	dead := refDeadlocked(pre, self, op.GetLock(), op.GetShared(), op.GetLimit())
	if dead[self] != refused {
		t.Fatalf("%v: the machine answered %v; the reference search says deadlocked=%v", cmd, res, dead[self])
	}
	if !refused {
		return
	}
	byName := map[string]*fsmpb.Lock{}
	for _, l := range pre {
		byName[l.GetName()] = l
	}
	cycle := res.GetDeadlock().GetEdges()
	if len(cycle) == 0 || cycle[0].GetSessionId() != self.session || cycle[0].GetOwnerKey() != self.key || cycle[0].GetLock() != op.GetLock() {
		t.Fatalf("%v: the cycle %v does not start with the refused wait", cmd, cycle)
	}
	if want := refCycleLen(pre, dead, self, op.GetLock()); want > 0 && len(cycle) != want {
		t.Fatalf("%v: the cycle %v has %d edges; the shortest has %d", cmd, cycle, len(cycle), want)
	}
	var nodes []refNode
	for _, e := range cycle {
		nodes = append(nodes, refNode{e.GetSessionId(), e.GetOwnerKey()})
	}
	isNode := func(w *fsmpb.Waiter, n refNode) bool { return refNode{w.GetSessionId(), w.GetOwnerKey()} == n }
	for i, e := range cycle {
		node, blocker := nodes[i], refNode{e.GetBlockerSessionId(), e.GetBlockerOwnerKey()}
		if !dead[node] || slices.Index(nodes, node) != i {
			t.Fatalf("%v: cycle edge %d: %v is not deadlocked for the reference, or named twice: %v", cmd, i, node, cycle)
		}
		switch {
		case i+1 < len(cycle) && blocker != nodes[i+1]:
			t.Fatalf("%v: cycle edge %d is blocked by %v, not by the next edge's %v", cmd, i, blocker, nodes[i+1])
		case i+1 == len(cycle) && !slices.Contains(nodes, blocker):
			t.Fatalf("%v: the last edge is blocked by %v, which no edge names", cmd, blocker)
		}
		l := byName[e.GetLock()]
		ws := l.GetWaiters()
		// Where node waits for l: the new wait at the tail, or a waiter
		// of node in the queue.
		var at []int
		if i == 0 {
			at = []int{len(ws)}
		}
		for p, w := range ws {
			if i > 0 && isNode(w, node) {
				at = append(at, p)
			}
		}
		ok := false
		for _, p := range at {
			if e.GetQueuedAhead() {
				ok = ok || slices.ContainsFunc(ws[:p], func(w *fsmpb.Waiter) bool { return isNode(w, blocker) })
			} else {
				ok = ok || slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool {
					return refNode{h.GetSessionId(), h.GetOwnerKey()} == blocker
				})
			}
		}
		if !ok {
			t.Fatalf("%v: cycle edge %d (%v) does not hold in the state: cycle %v; locks %v", cmd, i, e, cycle, pre)
		}
	}
}

// dlHarness applies commands for the deadlock tests at log version 11 (DeadlockVersion).
type dlHarness struct {
	t     *testing.T
	m     *Machine
	index uint64
	seqs  map[uint64]uint64
	stats map[string]int
	skips *int // nodes endStalled left unsearched (checkStalledSearch)
}

func newDLHarness(t *testing.T, sessions int) *dlHarness {
	h := &dlHarness{t: t, m: New(), seqs: map[uint64]uint64{}, stats: map[string]int{}}
	h.skips = checkStalledSearch(t, h.m)
	h.m.SetLogVersion(DeadlockVersion)
	for range sessions {
		h.apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o", TtlNanos: 10e9}}})
	}
	return h
}

// apply applies cmd (as session's next seq, if it has a session) and,
// for an Acquire with wait, checks the decision against the reference.
func (h *dlHarness) apply(cmd *fsmpb.Command) *fsmpb.Result {
	h.t.Helper()
	if id := cmd.GetSessionId(); id != 0 {
		h.seqs[id]++
		cmd.Seq, cmd.MinUnackedSeq = h.seqs[id], h.seqs[id]
	}
	pre := h.m.Locks("", "", 0)
	h.index++
	skips := *h.skips
	res := h.m.Apply(h.index, cmd)
	if cmd.GetAcquire().GetWait() {
		checkDeadlockDecision(h.t, pre, cmd, res)
	}
	if h.m.LogVersion() >= DeadlockAtGrantVersion {
		checkStalledEnds(h.t, pre, h.m.Locks("", "", 0), cmd, res, *h.skips > skips)
	}
	for _, e := range res.GetWaitsEnded() {
		h.stats["wait_ended/"+e.GetError().String()]++
	}
	h.stats[res.GetError().String()+"/"+res.GetAcquire().GetStatus().String()]++
	if err := checkInvariants(h.m); err != nil {
		h.t.Fatalf("entry %d %v -> %v: %v", h.index, cmd, res, err)
	}
	return res
}

// releaseOne releases one of session s's holds, drawn with r, if it
// holds any.
func (h *dlHarness) releaseOne(r *rand.Rand, s uint64) {
	var held []*fsmpb.Lock
	for _, l := range h.m.Locks("", "", 0) {
		if slices.ContainsFunc(l.GetHolders(), func(x *fsmpb.Holder) bool { return x.GetSessionId() == s }) {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return
	}
	l := held[r.IntN(len(held))]
	for _, x := range l.GetHolders() {
		if x.GetSessionId() == s {
			h.apply(&fsmpb.Command{SessionId: s, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{
				Lock: l.GetName(), OwnerKey: x.GetOwnerKey(), Token: x.GetToken()}}})
			return
		}
	}
}

func (h *dlHarness) acquire(session uint64, key, lock string, limit uint32, shared, wait bool) *fsmpb.Result {
	return h.apply(&fsmpb.Command{SessionId: session, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Lock: lock, OwnerKey: key, Limit: limit, Shared: shared, Wait: wait}}})
}

// TestDeadlockRings closes rings of 2 to 8 sessions over mutexes, read/
// write locks and semaphores: every wait but the last queues, and the
// last, which closes the ring, is refused with the whole ring.
func TestDeadlockRings(t *testing.T) {
	for _, kind := range []string{"mutex", "rwlock", "semaphore"} {
		for k := 2; k <= 8; k++ {
			t.Run(fmt.Sprintf("%s/%d", kind, k), func(t *testing.T) {
				h := newDLHarness(t, k)
				lock := func(i int) string { return fmt.Sprintf("l%d", i%k) }
				// Session i+1 holds lock i: the mutex, a read hold, or
				// both permits (owner keys a and b).
				for i := range k {
					s := uint64(i + 1)
					switch kind {
					case "mutex":
						h.acquire(s, "", lock(i), 1, false, false)
					case "rwlock":
						h.acquire(s, "", lock(i), 8, true, false)
					case "semaphore":
						h.acquire(s, "a", lock(i), 2, true, false)
						h.acquire(s, "b", lock(i), 2, true, false)
					}
				}
				// Then each waits for the next one's lock: a mutex, a
				// write hold (which every reader blocks), a permit (by
				// both keys, so every permit holder waits).
				for i := range k {
					s, last := uint64(i+1), i == k-1
					var res *fsmpb.Result
					switch kind {
					case "mutex":
						res = h.acquire(s, "", lock(i+1), 1, false, true)
					case "rwlock":
						res = h.acquire(s, "", lock(i+1), 8, false, true)
					case "semaphore":
						if r := h.acquire(s, "a", lock(i+1), 2, true, true); r.GetError() != fsmpb.Error_ERROR_NONE {
							t.Fatalf("session %d key a: %v", s, r)
						}
						res = h.acquire(s, "b", lock(i+1), 2, true, true)
					}
					switch {
					case !last && res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
						t.Fatalf("wait %d of %d: %v, want QUEUED", i+1, k, res)
					case last && res.GetError() != fsmpb.Error_ERROR_DEADLOCK:
						t.Fatalf("the wait closing the ring: %v, want DEADLOCK", res)
					case last && len(res.GetDeadlock().GetEdges()) < k:
						t.Fatalf("the cycle %v names fewer than %d waits", res.GetDeadlock().GetEdges(), k)
					}
				}
			})
		}
	}
}

// TestDeadlockRandom applies seeded random streams of acquires (waiting
// or not), releases and cancels by up to 8 sessions, with two owner keys
// each, over mutexes, read/write locks and semaphores, and checks every
// queued wait and every DEADLOCK refusal against the reference search
// (refDeadlocked), and every refusal's cycle against the state.
func TestDeadlockRandom(t *testing.T) {
	steps, seeds := 400, 40
	if testing.Short() {
		steps, seeds = 200, 10
	}
	type kind struct {
		name   string
		limit  uint32
		shared func(r *rand.Rand) bool
	}
	kinds := []kind{
		{"m", 1, func(*rand.Rand) bool { return false }},
		{"rw", 3, func(r *rand.Rand) bool { return r.IntN(3) > 0 }},
		{"sem", 2, func(*rand.Rand) bool { return true }},
	}
	total := map[string]int{}
	for i := range uint64(2 * seeds) {
		// The even runs at DeadlockVersion, the odd ones at
		// DeadlockAtGrantVersion (checkStalledEnds), on the same seeds.
		seed, v := i/2, uint32(DeadlockVersion)
		if i%2 == 1 {
			v = DeadlockAtGrantVersion
		}
		t.Run(fmt.Sprintf("v%d/seed=%d", v, seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0xdead10c))
			sessions := 2 + r.IntN(7) // 2 to 8
			h := newDLHarnessAt(t, sessions, v)
			keys := []string{"", "k"}
			for range steps {
				s := uint64(1 + r.IntN(sessions))
				key := keys[r.IntN(len(keys))]
				switch op := r.IntN(10); {
				case op < 6:
					k := kinds[r.IntN(len(kinds))]
					name := fmt.Sprintf("%s%d", k.name, r.IntN(2))
					h.acquire(s, key, name, k.limit, k.shared(r), r.IntN(4) > 0)
				case op < 9:
					h.releaseOne(r, s)
				default:
					// Cancel one of its waits (its context ended).
					for _, l := range h.m.Locks("", "", 0) {
						i := slices.IndexFunc(l.GetWaiters(), func(w *fsmpb.Waiter) bool { return w.GetSessionId() == s })
						if i >= 0 {
							h.apply(&fsmpb.Command{SessionId: s, Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
								Lock: l.GetName(), SessionId: s, AcquireSeq: l.GetWaiters()[i].GetAcquireSeq()}}})
							break
						}
					}
				}
			}
			for k, v := range h.stats {
				total[k] += v
			}
		})
	}
	t.Logf("outcomes: %v", total)
	if total["wait_ended/ERROR_DEADLOCK"] == 0 {
		t.Fatalf("no grant or cancel ended a wait as a deadlock")
	}
	if total["ERROR_DEADLOCK/ACQUIRE_STATUS_UNSPECIFIED"] == 0 || total["ERROR_NONE/ACQUIRE_STATUS_QUEUED"] == 0 {
		t.Fatalf("the streams refused %d waits as deadlocks and queued %d: both must happen",
			total["ERROR_DEADLOCK/ACQUIRE_STATUS_UNSPECIFIED"], total["ERROR_NONE/ACQUIRE_STATUS_QUEUED"])
	}
}

// TestDeadlockSearchBound: a ring of sessions, each holding its lock and
// waiting for the next one's, is refused when it closes while the search
// fits in MaxDeadlockSearch; a ring too long for it is queued, as the
// documented bound says (the search gives up rather than cost more).
func TestDeadlockSearchBound(t *testing.T) {
	for _, tc := range []struct {
		sessions int
		refused  bool
	}{{MaxDeadlockSearch / 8, true}, {MaxDeadlockSearch, false}} {
		t.Run(fmt.Sprint(tc.sessions), func(t *testing.T) {
			m := New()
			m.SetLogVersion(DeadlockVersion)
			index := uint64(0)
			apply := func(cmd *fsmpb.Command) *fsmpb.Result {
				index++
				return m.Apply(index, cmd)
			}
			acq := func(s uint64, seq uint64, lock string, wait bool) *fsmpb.Result {
				return apply(&fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: seq,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, Wait: wait}}})
			}
			for range tc.sessions {
				apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o"}}})
			}
			name := func(i int) string { return fmt.Sprintf("l%d", i%tc.sessions) }
			for i := range tc.sessions {
				acq(uint64(i+1), 1, name(i), false)
			}
			for i := range tc.sessions - 1 {
				if res := acq(uint64(i+1), 2, name(i+1), true); res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
					t.Fatalf("wait %d: %v", i+1, res)
				}
			}
			res := acq(uint64(tc.sessions), 2, name(0), true)
			if got := res.GetError() == fsmpb.Error_ERROR_DEADLOCK; got != tc.refused {
				t.Fatalf("closing a ring of %d: %v, want refused=%v", tc.sessions, res, tc.refused)
			}
			if tc.refused && len(res.GetDeadlock().GetEdges()) != tc.sessions {
				t.Fatalf("the cycle has %d edges, want %d", len(res.GetDeadlock().GetEdges()), tc.sessions)
			}
		})
	}
}

// TestDeadlockSearchCountsOwnWaits: a ring of 1,200 sessions, each
// holding its lock and waiting for the next one's, and each also waiting
// under a second owner key for a lock of an idle session. Closing the
// ring reads about three holds and waits per node from log version 15
// (OwnWaitsVersion: its own wait, the next lock's holder, its place in
// that queue), within MaxDeadlockSearch, and is refused; below it each
// node counted its session's other key's wait too, about four, past the
// bound, and the wait was queued.
func TestDeadlockSearchCountsOwnWaits(t *testing.T) {
	const ring = 1200
	for _, tc := range []struct {
		version uint32
		refused bool
	}{{OwnWaitsVersion - 1, false}, {OwnWaitsVersion, true}} {
		t.Run(fmt.Sprint(tc.version), func(t *testing.T) {
			m := New()
			m.SetLogVersion(tc.version)
			index := uint64(0)
			apply := func(cmd *fsmpb.Command) *fsmpb.Result {
				index++
				return m.Apply(index, cmd)
			}
			acq := func(s uint64, seq uint64, lock, key string, wait bool) *fsmpb.Result {
				return apply(&fsmpb.Command{SessionId: s, Seq: seq, MinUnackedSeq: seq,
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, OwnerKey: key, Wait: wait}}})
			}
			for range ring + 1 {
				apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o"}}})
			}
			idle := uint64(ring + 1)
			name := func(i int) string { return fmt.Sprintf("l%d", i%ring) }
			for i := range ring {
				acq(uint64(i+1), 1, name(i), "", false)
				acq(idle, uint64(i+1), fmt.Sprintf("z%d", i), "", false)
				if res := acq(uint64(i+1), 2, fmt.Sprintf("z%d", i), "x", true); res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
					t.Fatalf("key x of session %d: %v", i+1, res)
				}
			}
			for i := range ring - 1 {
				if res := acq(uint64(i+1), 3, name(i+1), "", true); res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
					t.Fatalf("wait %d: %v", i+1, res)
				}
			}
			res := acq(ring, 3, name(0), "", true)
			if got := res.GetError() == fsmpb.Error_ERROR_DEADLOCK; got != tc.refused {
				t.Fatalf("closing the ring at log version %d: %v, want refused=%v", tc.version, res.GetAcquire(), tc.refused)
			}
		})
	}
}

// formatCycle prints a deadlock's edges, one per line, indented.
func formatCycle(b *strings.Builder, indent string, edges []*fsmpb.DeadlockEdge) {
	for _, e := range edges {
		how := "held by"
		if e.GetQueuedAhead() {
			how = "behind"
		}
		fmt.Fprintf(b, "%sdeadlock-edge s%d/%q waits for %s %s s%d/%q\n", indent, e.GetSessionId(), e.GetOwnerKey(), e.GetLock(), how,
			e.GetBlockerSessionId(), e.GetBlockerOwnerKey())
	}
}

// TestDeadlockSearchIndexesWhatItCounts: an acquire queues behind a
// holder whose owner key waits first in each of 8 queues of 200 waiters.
// The search reads the holder's 8 waits; finding each one's place must
// cost no more than the waiters it counts toward MaxDeadlockSearch
// (placeOwn), not an index of each whole queue, which on every member
// took 280 ms for 64 such waits in queues of 10,000
// (BenchmarkSearchOwnWaitsInLongQueues).
func TestDeadlockSearchIndexesWhatItCounts(t *testing.T) {
	const waits, queue = 8, 200
	m, apply, open := searchMachine()
	holder, idle := open(), open()
	apply(holder, &fsmpb.Acquire{Lock: "hot"})
	for q := range waits {
		apply(idle, &fsmpb.Acquire{Lock: fmt.Sprint("q", q)})
		apply(holder, &fsmpb.Acquire{Lock: fmt.Sprint("q", q), Wait: true})
	}
	for range queue {
		s := open()
		for q := range waits {
			apply(s, &fsmpb.Acquire{Lock: fmt.Sprint("q", q), Wait: true})
		}
	}
	searches, placed := 0, 0
	m.searched = func(looked, places, _ int) {
		searches++
		placed += places
		if places > looked {
			t.Errorf("a search indexed the places of %d waiters and counted %d holds and waits", places, looked)
		}
	}
	if res := apply(open(), &fsmpb.Acquire{Lock: "hot", Wait: true}); res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		t.Fatalf("acquire: %v", res)
	}
	if searches != 1 || placed == 0 {
		t.Fatalf("%d searches indexed %d places; want the one search to look places up in the long queues", searches, placed)
	}
}

// TestDeadlockCycleReadsEachQueueOnce: an acquire refused at the tail of
// a queue of 300 waiters, all deadlocked with it (their lock's holder
// waits for a lock the acquirer holds). The refusal names the shortest
// cycle, found breadth first through every waiter's wait; each wait has
// the waiters ahead of it ahead of it, and the walk must read the queue
// once, not once per wait: read per wait, a refusal behind 4,000 such
// waiters took 8 s on every member (BenchmarkRefuseBehindDeadlockedQueue).
func TestDeadlockCycleReadsEachQueueOnce(t *testing.T) {
	const waiters = 300
	m, apply, open := searchMachine()
	holder, self := open(), open()
	apply(holder, &fsmpb.Acquire{Lock: "l"})
	apply(self, &fsmpb.Acquire{Lock: "m"})
	for range waiters {
		apply(open(), &fsmpb.Acquire{Lock: "l", Wait: true})
	}
	apply(holder, &fsmpb.Acquire{Lock: "m", Wait: true})
	read := -1
	m.searched = func(_, _, cycleRead int) { read = cycleRead }
	res := apply(self, &fsmpb.Acquire{Lock: "l", Wait: true})
	if res.GetError() != fsmpb.Error_ERROR_DEADLOCK || len(res.GetDeadlock().GetEdges()) != 3 {
		t.Fatalf("acquire: %v; want DEADLOCK through the first waiter and the holder", res)
	}
	if read < 0 || read > waiters {
		t.Fatalf("the cycle read %d waiters of a queue of %d", read, waiters)
	}
}

// searchMachine is a machine at this release's log version, with apply
// (session s's next acquire op) and open (a new session's id).
func searchMachine() (m *Machine, apply func(s uint64, op *fsmpb.Acquire) *fsmpb.Result, open func() uint64) {
	m = New()
	m.SetLogVersion(LogVersion)
	index := uint64(0)
	seqs := map[uint64]uint64{}
	apply = func(s uint64, op *fsmpb.Acquire) *fsmpb.Result {
		index++
		seqs[s]++
		return m.Apply(index, &fsmpb.Command{SessionId: s, Seq: seqs[s], MinUnackedSeq: seqs[s], Op: &fsmpb.Command_Acquire{Acquire: op}})
	}
	open = func() uint64 {
		index++
		return m.Apply(index, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o"}}}).GetSessionId()
	}
	return m, apply, open
}
