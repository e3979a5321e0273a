package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		base, want  int
	}{
		{4 * mib, 64 * mib, 100, 1500},       // grows to 64 MiB: 4 + 15*4
		{32 * mib, 64 * mib, 100, 100},       // 32 + 32 already reaches the floor
		{48 * mib, 64 * mib, 100, 100},       // never below the process's GOGC
		{500 * mib, 64 * mib, 100, 100},      // past the floor: untouched
		{1 * mib, 64 * mib, 100, MaxPercent}, // capped
		{0, 64 * mib, 100, MaxPercent},       // an empty heap does not divide by zero
		{4 * mib, 64 * mib, 3000, 3000},      // a higher GOGC of the process wins
		{16 * mib, 64 * mib, 50, 300},        // a lower one is raised like 100
	} {
		if got := Percent(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("Percent(%d MiB live, %d MiB floor, GOGC %d) = %d, want %d", tc.live/mib, tc.floor/mib, tc.base, got, tc.want)
		}
	}
}

// Start raises GOGC after a collection of a small heap, and stop puts the
// process's setting back.
func TestStartFollowsCollections(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	current := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	stop := Start(1 << 30) // a floor far above this test's heap
	raised := false
	for range 1000 {
		runtime.GC()
		runtime.Gosched() // the cleanup goroutine tunes after the collection
		if current() > 100 {
			raised = true
			break
		}
	}
	if !raised {
		t.Fatal("GOGC still 100 after collections of a heap far below the floor")
	}
	stop()
	if p := current(); p != 100 {
		t.Fatalf("GOGC %d after stop, want the process's 100 back", p)
	}
}
