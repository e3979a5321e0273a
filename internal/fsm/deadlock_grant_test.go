package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// newDLHarnessAt is newDLHarness at log version v.
func newDLHarnessAt(t *testing.T, sessions int, v uint32) *dlHarness {
	h := newDLHarness(t, sessions)
	h.m.SetLogVersion(v)
	return h
}

// stalledByGrant builds the deadlock a grant closes: node (2, "k") waits
// for a, held by session 1, and for b, held by session 3, which waits for
// a behind it. When session 1 releases a, (2, "k") gets it and its wait
// for b waits on session 3, which waits for a: a cycle with no new wait.
// It returns the release's result and (2, "k")'s seq of its wait for b.
func stalledByGrant(h *dlHarness) (*fsmpb.Result, uint64) {
	h.t.Helper()
	tokA := h.acquire(1, "", "a", 1, false, false).GetAcquire().GetToken()
	h.acquire(3, "", "b", 1, false, false)
	h.acquire(2, "k", "a", 1, false, true)
	if r := h.acquire(2, "k", "b", 1, false, true); r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		h.t.Fatalf("(2, k) waits for b: %v", r)
	}
	waitB := h.seqs[2]
	if r := h.acquire(3, "", "a", 1, false, true); r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		h.t.Fatalf("session 3 waits for a: %v", r)
	}
	res := h.apply(&fsmpb.Command{SessionId: 1, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "a", Token: tokA}}})
	return res, waitB
}

// TestDeadlockAtGrant: from DeadlockAtGrantVersion the release that
// grants a to (2, "k") ends its wait for b with DEADLOCK and the cycle
// (in waits_ended, and in the cached answer a retry of the wait gets);
// below it the wait stays queued, as before.
func TestDeadlockAtGrant(t *testing.T) {
	for _, v := range []uint32{DeadlockAtGrantVersion - 1, DeadlockAtGrantVersion} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			h := newDLHarnessAt(t, 3, v)
			res, waitB := stalledByGrant(h)
			if len(res.GetGrants()) != 1 || res.GetGrants()[0].GetSessionId() != 2 {
				t.Fatalf("the release granted %v, want a to session 2", res.GetGrants())
			}
			l, _ := h.m.Lock("b")
			if v < DeadlockAtGrantVersion {
				if len(res.GetWaitsEnded()) != 0 || len(l.GetWaiters()) != 1 {
					t.Fatalf("below version %d: waits ended %v, b's queue %v; want the wait kept", DeadlockAtGrantVersion, res.GetWaitsEnded(), l.GetWaiters())
				}
				return
			}
			if len(res.GetWaitsEnded()) != 1 || len(l.GetWaiters()) != 0 {
				t.Fatalf("waits ended %v, b's queue %v; want (2, k)'s wait for b ended", res.GetWaitsEnded(), l.GetWaiters())
			}
			e := res.GetWaitsEnded()[0]
			cycle := e.GetDeadlock().GetEdges()
			if e.GetError() != fsmpb.Error_ERROR_DEADLOCK || e.GetSessionId() != 2 || e.GetAcquireSeq() != waitB || e.GetLock() != "b" || len(cycle) != 2 {
				t.Fatalf("wait ended %v, want (2, k)'s wait for b with DEADLOCK and a cycle of 2", e)
			}
			first, second := cycle[0], cycle[1]
			if first.GetSessionId() != 2 || first.GetOwnerKey() != "k" || first.GetLock() != "b" || first.GetBlockerSessionId() != 3 ||
				second.GetSessionId() != 3 || second.GetLock() != "a" || second.GetBlockerSessionId() != 2 || second.GetBlockerOwnerKey() != "k" {
				t.Fatalf("cycle %v, want (2, k) waits for b held by 3, 3 waits for a held by (2, k)", cycle)
			}
			// A retry of the wait learns the same from the cache.
			h.index++
			retry := h.m.Apply(h.index, &fsmpb.Command{SessionId: 2, Seq: waitB, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
				Lock: "b", OwnerKey: "k", Wait: true}}})
			if retry.GetError() != fsmpb.Error_ERROR_DEADLOCK || len(retry.GetDeadlock().GetEdges()) != 2 ||
				retry.GetMessage() != DescribeCycle(cycle) {
				t.Fatalf("retry of the wait: %v, want the DEADLOCK and its cycle", retry)
			}
		})
	}
}

// TestDeadlockAtCancel: node (2, "k") waits for x (held by session 1,
// which waits for nothing) and for b (held by session 3, which waits for
// c, held by (2, "k")). While its wait for x may be granted it is free;
// once that wait is cancelled (timed out) only the cycle is left, and
// from DeadlockAtGrantVersion the cancel ends its wait for b too.
func TestDeadlockAtCancel(t *testing.T) {
	for _, v := range []uint32{DeadlockAtGrantVersion - 1, DeadlockAtGrantVersion} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			h := newDLHarnessAt(t, 3, v)
			h.acquire(1, "", "x", 1, false, false)
			h.acquire(3, "", "b", 1, false, false)
			h.acquire(2, "k", "c", 1, false, false)
			h.acquire(2, "k", "x", 1, false, true)
			waitX := h.seqs[2]
			h.acquire(2, "k", "b", 1, false, true)
			waitB := h.seqs[2]
			if r := h.acquire(3, "", "c", 1, false, true); r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
				t.Fatalf("session 3 waits for c: %v", r)
			}
			res := h.apply(&fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
				Lock: "x", SessionId: 2, AcquireSeq: waitX, TimedOut: true}}})
			ended := res.GetWaitsEnded()
			if v < DeadlockAtGrantVersion {
				if len(ended) != 1 {
					t.Fatalf("below version %d the cancel ended %v, want its own wait only", DeadlockAtGrantVersion, ended)
				}
				return
			}
			if len(ended) != 2 || ended[1].GetError() != fsmpb.Error_ERROR_DEADLOCK || ended[1].GetAcquireSeq() != waitB ||
				len(ended[1].GetDeadlock().GetEdges()) != 2 {
				t.Fatalf("the cancel ended %v, want its wait and then (2, k)'s wait for b as a DEADLOCK", ended)
			}
		})
	}
}

// checkStalledEnds checks, from DeadlockAtGrantVersion, what an entry
// (its result res) did to deadlocks, given the locks before (pre) and
// after it (post): no node is deadlocked after it that was not before
// (its grants and cancels left none), and every wait it ended as a
// DEADLOCK names a cycle that starts with it. (checkStalledSearch
// checks each search in the state it saw.) An entry that left nodes
// unsearched (skipped, past MaxStalledSearches) may leave them, and
// whoever waits on them, deadlocked.
func checkStalledEnds(t *testing.T, pre, post []*fsmpb.Lock, cmd *fsmpb.Command, res *fsmpb.Result, skipped bool) {
	t.Helper()
	before, after := refDeadlocked(pre, refNode{}, "", false, 0), refDeadlocked(post, refNode{}, "", false, 0)
	for n := range after {
		if !before[n] && !skipped {
			t.Fatalf("%v -> %v: %v is deadlocked after the entry and was not before; locks %v", cmd, res, n, post)
		}
	}
	for _, e := range res.GetWaitsEnded() {
		cycle := e.GetDeadlock().GetEdges()
		switch {
		case e.GetError() != fsmpb.Error_ERROR_DEADLOCK && cycle != nil:
			t.Fatalf("%v: wait end %v has a cycle", cmd, e)
		case e.GetError() == fsmpb.Error_ERROR_DEADLOCK && (len(cycle) == 0 || cycle[0].GetSessionId() != e.GetSessionId() || cycle[0].GetLock() != e.GetLock()):
			t.Fatalf("%v: the cycle of %v does not start with its wait", cmd, e)
		}
	}
}

// checkStalledSearch makes m check each search endStalled makes against
// the reference, in the state the search saw: the node is deadlocked
// for refDeadlocked exactly when the machine ends its waits, and each
// wait's cycle starts with it and holds in that state. It returns the
// count of nodes endStalled left unsearched (MaxStalledSearches).
func checkStalledSearch(t *testing.T, m *Machine) *int {
	skipped := new(int)
	m.skippedStalled = func(uint64, string) { *skipped++ }
	m.searchedStalled = func(session uint64, key string, ws []stalledWait) {
		t.Helper()
		locks := m.Locks("", "", 0)
		self := refNode{session, key}
		dead := refDeadlocked(locks, refNode{}, "", false, 0)
		if dead[self] != (ws != nil) {
			t.Fatalf("after a grant or cancel, %v: the machine found %d deadlocked waits; the reference says deadlocked=%v in %v", self, len(ws), dead[self], locks)
		}
		byName := map[string]*fsmpb.Lock{}
		for _, l := range locks {
			byName[l.GetName()] = l
		}
		for _, w := range ws {
			cycle := w.cycle
			if len(cycle) == 0 || (refNode{cycle[0].GetSessionId(), cycle[0].GetOwnerKey()}) != self || cycle[0].GetLock() != w.lock.name {
				t.Fatalf("the cycle %v does not start with %v's wait for %s", cycle, self, w.lock.name)
			}
			var nodes []refNode
			for _, c := range cycle {
				nodes = append(nodes, refNode{c.GetSessionId(), c.GetOwnerKey()})
			}
			for i, c := range cycle {
				node, blocker := nodes[i], refNode{c.GetBlockerSessionId(), c.GetBlockerOwnerKey()}
				if !dead[node] || (i+1 < len(cycle) && blocker != nodes[i+1]) || (i+1 == len(cycle) && !slices.Contains(nodes, blocker)) {
					t.Fatalf("cycle %v edge %d: not deadlocked, or not blocked by the next edge's node", cycle, i)
				}
				l := byName[c.GetLock()]
				ok := false
				for p, x := range l.GetWaiters() {
					if (refNode{x.GetSessionId(), x.GetOwnerKey()}) != node {
						continue
					}
					if c.GetQueuedAhead() {
						ok = ok || slices.ContainsFunc(l.GetWaiters()[:p], func(y *fsmpb.Waiter) bool { return refNode{y.GetSessionId(), y.GetOwnerKey()} == blocker })
					} else {
						ok = ok || slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool { return refNode{h.GetSessionId(), h.GetOwnerKey()} == blocker })
					}
				}
				if !ok {
					t.Fatalf("cycle %v edge %d does not hold in %v", cycle, i, locks)
				}
			}
		}
	}
	return skipped
}

// TestWaitsOfOneKeyReenterAtTheGrant: node (2, "k") waits twice for x,
// with session 3 queued between its waits. From DeadlockAtGrantVersion
// the release that grants x to the first wait re-enters it with the
// second in the same entry (count 2, the same token, session 3 still
// queued), as an acquire made then would; a retry of the second wait
// learns the grant. Below it the second wait stays queued behind session
// 3 until the node's hold ends. A wait of the node in another mode cannot
// re-enter; from 14 it is deadlocked behind its own node's hold and ends.
//
// With crowd, session 2's other keys also wait manyWaits times for
// another lock, so that the session keeps its waits by owner key
// (session.keyWaits) and the grant looks for the node's own there.
func TestWaitsOfOneKeyReenterAtTheGrant(t *testing.T) {
	for _, v := range []uint32{DeadlockAtGrantVersion - 1, DeadlockAtGrantVersion} {
		for _, crowd := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/crowd=%v", v, crowd), func(t *testing.T) { testWaitsOfOneKeyReenter(t, v, crowd) })
		}
	}
}

func testWaitsOfOneKeyReenter(t *testing.T, v uint32, crowd bool) {
	h := newDLHarnessAt(t, 3, v)
	if crowd {
		h.acquire(1, "", "busy", 0, false, false)
		for i := range manyWaits {
			h.acquire(2, fmt.Sprint("o", i), "busy", 0, false, true)
		}
	}
	tok := h.acquire(1, "", "x", 8, false, false).GetAcquire().GetToken()
	h.acquire(2, "k", "x", 8, false, true)
	first := h.seqs[2]
	h.acquire(3, "", "x", 8, false, true)
	h.acquire(2, "k", "x", 8, true, true) // a reader: another mode
	reader := h.seqs[2]
	h.acquire(2, "k", "x", 8, false, true)
	second := h.seqs[2] // the last: its retry is answered from the cache
	res := h.apply(&fsmpb.Command{SessionId: 1, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: tok}}})
	l, _ := h.m.Lock("x")
	var queued []uint64
	for _, w := range l.GetWaiters() {
		queued = append(queued, w.GetSessionId())
	}
	var granted []uint64
	for _, g := range res.GetGrants() {
		if g.GetSessionId() != 2 || g.GetToken() != h.index {
			t.Fatalf("grant %v, want session 2's with token %d", g, h.index)
		}
		granted = append(granted, g.GetAcquireSeq())
	}
	if v < DeadlockAtGrantVersion {
		if !slices.Equal(granted, []uint64{first}) || !slices.Equal(queued, []uint64{3, 2, 2}) || len(res.GetWaitsEnded()) != 0 {
			t.Fatalf("below %d: granted %v, queue %v, ended %v; want the first wait only, the others queued", DeadlockAtGrantVersion, granted, queued, res.GetWaitsEnded())
		}
		return
	}
	if !slices.Equal(granted, []uint64{first, second}) || !slices.Equal(queued, []uint64{3}) {
		t.Fatalf("granted %v, queue %v; want both of (2, k)'s writer waits granted and session 3 queued", granted, queued)
	}
	if hs := l.GetHolders(); len(hs) != 1 || hs[0].GetCount() != 2 || hs[0].GetToken() != h.index {
		t.Fatalf("holders %v, want (2, k) once, count 2", hs)
	}
	if e := res.GetWaitsEnded(); len(e) != 1 || e[0].GetAcquireSeq() != reader || e[0].GetError() != fsmpb.Error_ERROR_DEADLOCK {
		t.Fatalf("waits ended %v, want the reader wait ended as deadlocked behind its own hold", e)
	}
	h.index++
	retry := h.m.Apply(h.index, &fsmpb.Command{SessionId: 2, Seq: second, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Lock: "x", OwnerKey: "k", Limit: 8, Wait: true}}})
	if o := retry.GetAcquire(); o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED || o.GetToken() != h.index-1 || o.GetCount() != 2 {
		t.Fatalf("retry of the second wait: %v, want GRANTED, count 2, the hold's token", retry)
	}
}
