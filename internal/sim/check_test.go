package sim

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func expireCmd(session uint64, wall int64) *fsmpb.Command {
	return &fsmpb.Command{WallTimeUnixNano: wall, Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: session}}}
}

// TestResolveInternal: a proposal that never learnt its outcome is given
// the outcome of the entry with its command applied after it was made,
// each entry to one proposal, the earliest; one with no such entry is
// dropped; one that learnt its outcome keeps it and its entry.
func TestResolveInternal(t *testing.T) {
	k := &checker{log: map[uint64]*logEntry{}}
	propose := func(session uint64, call int64) *internalOp {
		op := &internalOp{kind: opExpire, session: session, call: call, key: proposalKey(expireCmd(session, call*1000))}
		k.internal = append(k.internal, op)
		return op
	}
	apply := func(index, session uint64, pos int64, code fsmpb.Error) {
		k.log[index] = &logEntry{cmd: expireCmd(session, pos*1000), res: &fsmpb.Result{Error: code}, firstPos: pos}
	}
	unknown := func(op *internalOp) { op.done, op.ret, op.out = true, 1<<60, outcome{unknown: true} }

	// Session 7: two trackers proposed its expiry (calls 10 and 20), neither
	// learnt the outcome; one entry applied at 30.
	a, b := propose(7, 10), propose(7, 20)
	unknown(a) // its leader lost office
	_ = b      // its member stopped before the answer
	apply(5, 7, 30, fsmpb.Error_ERROR_NONE)
	// Session 8: proposed at 40, never applied.
	unknown(propose(8, 40))
	// Session 9: proposed at 50 and answered (index 6); a second proposal at
	// 55 applied at 70 and found the session gone.
	c := propose(9, 50)
	c.done, c.ret, c.index, c.out = true, 60, 6, outcome{}
	apply(6, 9, 58, fsmpb.Error_ERROR_NONE)
	unknown(propose(9, 55))
	apply(7, 9, 70, fsmpb.Error_ERROR_SESSION_NOT_FOUND)
	// Session 10: an entry applied before the only proposal was made is not
	// its (a proposal takes effect after it is made).
	apply(8, 10, 75, fsmpb.Error_ERROR_NONE)
	unknown(propose(10, 80))

	got := map[int64]*internalOp{}
	for _, op := range k.resolveInternal() {
		if got[op.call] != nil {
			t.Fatalf("call %d resolved twice", op.call)
		}
		got[op.call] = op
	}
	want := map[int64]struct {
		ret  int64
		code fsmpb.Error
	}{
		10: {30, fsmpb.Error_ERROR_NONE},
		50: {60, fsmpb.Error_ERROR_NONE},
		55: {70, fsmpb.Error_ERROR_SESSION_NOT_FOUND},
	}
	if len(got) != len(want) {
		t.Errorf("resolved %d operations, want %d (calls 10, 50, 55)", len(got), len(want))
	}
	for call, w := range want {
		op := got[call]
		switch {
		case op == nil:
			t.Errorf("call %d: dropped, want returned at %d with %v", call, w.ret, w.code)
		case op.out.unknown || op.ret != w.ret || op.out.code != w.code:
			t.Errorf("call %d: returned at %d with %+v, want at %d with %v", call, op.ret, op.out, w.ret, w.code)
		}
	}
	if !a.out.unknown {
		t.Errorf("resolving changed the recorded operation: %+v", a.out)
	}
}

// TestCheckDeadlock: checker i accepts a refusal whose cycle holds and
// whose waiters cannot go on, and refuses one whose named set could: a
// wait of it would be granted once everyone else let go, or an edge it
// names is not in the state.
func TestCheckDeadlock(t *testing.T) {
	holder := func(s uint64) *fsmpb.Holder { return &fsmpb.Holder{SessionId: s} }
	waiter := func(s uint64) *fsmpb.Waiter { return &fsmpb.Waiter{SessionId: s} }
	cmd := &fsmpb.Command{SessionId: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}}
	res := &fsmpb.Result{Error: fsmpb.Error_ERROR_DEADLOCK, Deadlock: &fsmpb.DeadlockCycle{Edges: []*fsmpb.DeadlockEdge{
		{SessionId: 2, Lock: "x", BlockerSessionId: 1},
		{SessionId: 1, Lock: "y", BlockerSessionId: 2},
	}}}
	deadlocked := []*fsmpb.Lock{
		{Name: "x", Holders: []*fsmpb.Holder{holder(1)}},
		{Name: "y", Holders: []*fsmpb.Holder{holder(2)}, Waiters: []*fsmpb.Waiter{waiter(1)}},
	}
	if err := checkDeadlock(deadlocked, cmd, res); err != nil {
		t.Fatalf("a true deadlock: %v", err)
	}
	// y is a semaphore of 2 that session 3 also holds: session 1's
	// permit comes once 3 lets go.
	semaphore := []*fsmpb.Lock{
		{Name: "x", Holders: []*fsmpb.Holder{holder(1)}},
		{Name: "y", Limit: 2, Holders: []*fsmpb.Holder{{SessionId: 2, Shared: true}, {SessionId: 3, Shared: true}},
			Waiters: []*fsmpb.Waiter{{SessionId: 1, Shared: true}}},
	}
	if err := checkDeadlock(semaphore, cmd, res); err == nil {
		t.Fatal("a wait that a permit serves passed as a deadlock")
	}
	// Session 1 does not wait for y at all.
	notWaiting := []*fsmpb.Lock{
		{Name: "x", Holders: []*fsmpb.Holder{holder(1)}},
		{Name: "y", Holders: []*fsmpb.Holder{holder(2)}},
	}
	if err := checkDeadlock(notWaiting, cmd, res); err == nil {
		t.Fatal("a cycle through a wait that is not queued passed")
	}
}

// TestCheckDeadlockEnd: checker i accepts a wait a grant ended as a
// deadlock (log version 14), with the cycle the state machine named, and
// rejects a cycle that does not hold or a wait that was not queued.
func TestCheckDeadlockEnd(t *testing.T) {
	m := fsm.New()
	m.SetLogVersion(fsm.DeadlockAtGrantVersion)
	index := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		index++
		return m.Apply(index, cmd)
	}
	acquire := func(session, seq uint64, key, lock string, wait bool) {
		apply(&fsmpb.Command{SessionId: session, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, OwnerKey: key, Wait: wait}}})
	}
	for range 3 {
		apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o", TtlNanos: 10e9}}})
	}
	// (2, k) waits for a (held by 1) and b (held by 3); 3 waits for a
	// behind it; 1's release grants a to (2, k) and closes the cycle.
	acquire(1, 1, "", "a", false)
	acquire(3, 1, "", "b", false)
	acquire(2, 1, "k", "a", true)
	acquire(2, 2, "k", "b", true)
	acquire(3, 2, "", "a", true)
	before := m.Locks("", "", 0)
	res := apply(&fsmpb.Command{SessionId: 1, Seq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "a", Token: 4}}})
	after := m.Locks("", "", 0)
	if len(res.GetWaitsEnded()) != 1 {
		t.Fatalf("the release ended %v, want (2, k)'s wait for b", res.GetWaitsEnded())
	}
	e := res.GetWaitsEnded()[0]
	if err := checkDeadlockEnd(before, after, e); err != nil {
		t.Fatalf("the machine's end: %v", err)
	}
	forged := proto.Clone(e).(*fsmpb.WaitEnded)
	forged.GetDeadlock().GetEdges()[1].BlockerOwnerKey = ""
	if err := checkDeadlockEnd(before, after, forged); err == nil {
		t.Fatal("a cycle whose last edge names a node outside it passed")
	}
	notQueued := proto.Clone(e).(*fsmpb.WaitEnded)
	notQueued.AcquireSeq = 9
	if err := checkDeadlockEnd(before, after, notQueued); err == nil {
		t.Fatal("a wait that was not queued passed")
	}
}
