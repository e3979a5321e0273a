package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestScans: EachHold sees every hold with the since and token of the
// entry that granted it; ScanLocks pages through the locks in name order
// with each one's holders, oldest since and waiters.
func TestScans(t *testing.T) {
	m := New()
	idx := uint64(0)
	apply := func(wall int64, cmd *fsmpb.Command) *fsmpb.Result {
		idx++
		cmd.WallTimeUnixNano = wall
		res := m.Apply(idx, cmd)
		if res.GetError() != fsmpb.Error_ERROR_NONE {
			t.Fatalf("entry %d %v: %v", idx, cmd, res)
		}
		return res
	}
	open := func() uint64 {
		return apply(1, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "w"}}}).GetSessionId()
	}
	a, b, c := open(), open(), open()
	acquire := func(wall int64, s, seq uint64, lock string, shared, wait bool) {
		limit := uint32(0)
		if shared {
			limit = 2
		}
		apply(wall, &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lock, Shared: shared, Limit: limit, Wait: wait}}})
	}
	acquire(100, a, 1, "r", true, false) // entry 4
	acquire(50, b, 1, "r", true, false)  // entry 5: the older since, on a later entry
	acquire(200, a, 2, "x", false, false)
	acquire(300, b, 2, "x", false, true)
	acquire(400, c, 1, "x", false, true)
	acquire(500, c, 2, "y", false, false)

	var holds []string
	m.EachHold(func(lock string, session, token uint64, since int64) {
		holds = append(holds, fmt.Sprintf("%s/%d/%d/%d", lock, session, token, since))
	})
	want := []string{
		fmt.Sprintf("r/%d/4/100", a), fmt.Sprintf("r/%d/5/50", b),
		fmt.Sprintf("x/%d/6/200", a), fmt.Sprintf("y/%d/9/500", c),
	}
	if !slices.Equal(holds, want) {
		t.Errorf("EachHold: %q, want %q", holds, want)
	}

	var pages [][]string
	after := ""
	for {
		var page []string
		after = m.ScanLocks(after, 2, func(name string, holders int, oldest int64, waiters int) {
			page = append(page, fmt.Sprintf("%s:%d:%d:%d", name, holders, oldest, waiters))
		})
		if after == "" {
			break
		}
		pages = append(pages, page)
	}
	wantPages := [][]string{{"r:2:50:0", "x:1:200:2"}, {"y:1:500:0"}}
	if fmt.Sprint(pages) != fmt.Sprint(wantPages) {
		t.Errorf("ScanLocks by 2: %q, want %q", pages, wantPages)
	}
}
