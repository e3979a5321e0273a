package fsm

import (
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestHasResult: a session's answered requests are known by their seq
// (a queued acquire's among them) until min_unacked_seq passes them;
// another seq, session or seq 0 is not.
func TestHasResult(t *testing.T) {
	m := New()
	idx := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		idx++
		res := m.Apply(idx, cmd)
		if res.GetError() != fsmpb.Error_ERROR_NONE {
			t.Fatalf("entry %d %v: %v", idx, cmd, res)
		}
		return res
	}
	open := func() uint64 {
		return apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "w"}}}).GetSessionId()
	}
	a, b := open(), open()
	apply(&fsmpb.Command{SessionId: a, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x"}}})
	queued := apply(&fsmpb.Command{SessionId: b, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}})
	if queued.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		t.Fatalf("second acquire of x: %v, want queued", queued)
	}
	for _, tt := range []struct {
		session, seq uint64
		want         bool
	}{
		{a, 1, true}, {b, 1, true}, {a, 2, false}, {a, 0, false}, {b + 1, 1, false},
	} {
		if got := m.HasResult(tt.session, tt.seq); got != tt.want {
			t.Errorf("HasResult(%d, %d) = %v, want %v", tt.session, tt.seq, got, tt.want)
		}
	}
	// Acknowledged: seq 1 is forgotten once seq 2 says so.
	apply(&fsmpb.Command{SessionId: a, Seq: 2, MinUnackedSeq: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "y"}}})
	if m.HasResult(a, 1) || !m.HasResult(a, 2) {
		t.Errorf("after min_unacked_seq 2: HasResult(a, 1) = %v, HasResult(a, 2) = %v; want false, true", m.HasResult(a, 1), m.HasResult(a, 2))
	}
}
