package fsm

import (
	"fmt"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestPastLocksBound: the history keeps the PastLocks locks whose last end
// is the most recent; an end moves its lock to the front.
func TestPastLocksBound(t *testing.T) {
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
	s := apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "w"}}}).GetSessionId()
	seq := uint64(0)
	cycle := func(name string) {
		seq++
		tok := apply(&fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}}).GetAcquire().GetToken()
		seq++
		apply(&fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: tok}}})
	}
	name := func(i int) string { return fmt.Sprintf("job/%05d", i) }
	for i := range PastLocks {
		cycle(name(i))
	}
	cycle(name(0)) // job/00000 is the most recent again: job/00001 is the oldest
	cycle(name(PastLocks))
	if n := len(m.past.locks); n != PastLocks {
		t.Fatalf("history of %d locks, want %d", n, PastLocks)
	}
	if got := m.PastHolds(name(1)); got != nil {
		t.Fatalf("the oldest lock's history was kept: %+v", got)
	}
	if got := m.PastHolds(name(0)); len(got) != 2 {
		t.Fatalf("%s: %d ends, want 2", name(0), len(got))
	}
	if got := m.PastHolds(name(2)); len(got) != 1 || got[0].How != EndReleased || got[0].Owner != "w" {
		t.Fatalf("%s: %+v", name(2), got)
	}

	// Memory only: not in the snapshot, nor in the hash.
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	fresh := New()
	if err := fresh.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if fresh.Hash() != m.Hash() {
		t.Fatal("a machine restored from the snapshot hashes differently: the history is in the hash")
	}
	if got := fresh.PastHolds(name(0)); got != nil {
		t.Fatalf("the history came through a snapshot: %+v", got)
	}
}
