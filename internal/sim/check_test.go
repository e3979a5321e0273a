package sim

import (
	"testing"

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
