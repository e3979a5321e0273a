package fsm

import (
	"bytes"
	"testing"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// completeCase is one question to HistoryComplete and its answer.
type completeCase struct {
	lock  string
	after uint64
	want  bool
}

func checkComplete(t *testing.T, m *Machine, cases ...completeCase) {
	t.Helper()
	for _, c := range cases {
		if got := m.HistoryComplete(c.lock, c.after); got != c.want {
			t.Errorf("HistoryComplete(%q, %d) = %v, want %v (ends %+v, floor %d, log version %d)",
				c.lock, c.after, got, c.want, m.PastHolds(c.lock), m.HistoryFloor(), m.LogVersion())
		}
	}
}

// lastEndOf is the index of the most recent end of name in m's history.
func lastEndOf(t *testing.T, m *Machine, name string) uint64 {
	t.Helper()
	ends := m.PastHolds(name)
	if len(ends) == 0 {
		t.Fatalf("%s has no history", name)
	}
	return ends[0].EndedIndex
}

// oldestEndOf is the index of the oldest end of name in m's history.
func oldestEndOf(t *testing.T, m *Machine, name string) uint64 {
	t.Helper()
	ends := m.PastHolds(name)
	if len(ends) == 0 {
		t.Fatalf("%s has no history", name)
	}
	return ends[len(ends)-1].EndedIndex
}

// TestHistoryCompleteBelowWatchVersion: below WatchHistoryVersion only a
// kept end at or before after vouches for the ends after it; a lock
// with no history, or whose ends all came later, may have lost some.
func TestHistoryCompleteBelowWatchVersion(t *testing.T) {
	r := newPastRig(t, EndHoldsFirstVersion)
	r.cycle("a")
	first := lastEndOf(t, r.m, "a")
	r.cycle("a")
	if r.m.HistoryFloor() != 0 {
		t.Fatalf("a floor of %d below version %d", r.m.HistoryFloor(), WatchHistoryVersion)
	}
	checkComplete(t, r.m,
		completeCase{"a", first, true},
		completeCase{"a", r.idx, true},
		completeCase{"a", first - 1, false}, // not full, but no floor below 13
		completeCase{"none", r.idx, false},
		completeCase{"none", 0, false},
	)
}

// TestHistoryCompleteRingFull: at WatchHistoryVersion a lock's ring that
// is not full holds every end after the floor; a full one may have
// pushed out ends older than its oldest.
func TestHistoryCompleteRingFull(t *testing.T) {
	r := newPastRig(t, WatchHistoryVersion) // entry 1 raised it
	if r.m.HistoryFloor() != 1 {
		t.Fatalf("floor %d, want 1: the entry that raised the version", r.m.HistoryFloor())
	}
	checkComplete(t, r.m,
		completeCase{"a", 1, true}, // no history, and none lost since the raise
		completeCase{"a", 0, false},
	)
	for range PastHoldsPerLock - 1 {
		r.cycle("a")
	}
	oldest := oldestEndOf(t, r.m, "a")
	checkComplete(t, r.m,
		completeCase{"a", 1, true}, // 7 of 8: nothing pushed out
		completeCase{"a", oldest - 1, true},
		completeCase{"a", 0, false}, // below the floor
	)
	r.cycle("a") // full: the ring holds 8, and lost none yet, but cannot tell
	checkComplete(t, r.m,
		completeCase{"a", oldest - 1, false},
		completeCase{"a", oldest, true},
	)
	r.cycle("a") // the first end is pushed out
	if got := oldestEndOf(t, r.m, "a"); got == oldest {
		t.Fatal("a ninth end pushed out none")
	}
	checkComplete(t, r.m,
		// Only the end at oldest went, but a full ring cannot tell how
		// many did: complete only from its oldest kept end.
		completeCase{"a", oldest, false},
		completeCase{"a", oldestEndOf(t, r.m, "a"), true},
		completeCase{"b", 1, true}, // another lock, untouched
	)
}

// TestHistoryCompleteFromTheRaise: the entry that raises the cluster to
// WatchHistoryVersion starts the floor at its index: ends from before it
// were not tracked, so only a kept end vouches for them.
func TestHistoryCompleteFromTheRaise(t *testing.T) {
	r := newPastRig(t, EndHoldsFirstVersion)
	r.cycle("a")
	before := lastEndOf(t, r.m, "a")
	r.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: WatchHistoryVersion}}})
	raise := r.idx
	if r.m.HistoryFloor() != raise {
		t.Fatalf("floor %d, want %d, the entry that raised the version", r.m.HistoryFloor(), raise)
	}
	r.cycle("a")
	checkComplete(t, r.m,
		completeCase{"a", before, true}, // rule 1, as below 13
		completeCase{"a", before - 1, false},
		completeCase{"b", raise, true},
		completeCase{"b", raise - 1, false},
	)
	// A later raise moves nothing.
	r.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: WatchHistoryVersion + 1}}})
	if r.m.HistoryFloor() != raise {
		t.Fatalf("floor %d after a second raise, want %d", r.m.HistoryFloor(), raise)
	}
	// Raised from below HistoryVersion straight to it: the history is
	// emptied and the floor starts at the entry.
	r2 := newPastRig(t, 1)
	r2.cycle("a")
	r2.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: WatchHistoryVersion}}})
	if r2.m.PastHolds("a") != nil || r2.m.HistoryFloor() != r2.idx {
		t.Fatalf("after the raise from 1: history %+v, floor %d; want none and %d", r2.m.PastHolds("a"), r2.m.HistoryFloor(), r2.idx)
	}
	checkComplete(t, r2.m, completeCase{"a", r2.idx, true}, completeCase{"a", r2.idx - 1, false})
}

// TestHistoryFloorEviction: a lock whose whole history is evicted moves
// the floor to its last end; a lock with no history, or one whose ring is
// not full, is then complete only from there. The floor is replicated:
// it comes through a snapshot (and a frozen state's encoding) and is in
// Hash; below WatchHistoryVersion eviction moves none.
func TestHistoryFloorEviction(t *testing.T) {
	below := newPastRig(t, EndHoldsFirstVersion)
	r := newPastRig(t, WatchHistoryVersion)
	for _, rig := range []*pastRig{below, r} {
		for i := range PastLocks {
			rig.cycle(pastName(i))
		}
	}
	evicted := lastEndOf(t, r.m, pastName(0))
	next := lastEndOf(t, r.m, pastName(1))
	snap, err := r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f := r.m.Freeze()
	for _, rig := range []*pastRig{below, r} {
		rig.cycle("new") // evicts job/00000
	}
	if below.m.HistoryFloor() != 0 {
		t.Fatalf("eviction below version %d moved the floor to %d", WatchHistoryVersion, below.m.HistoryFloor())
	}
	if r.m.HistoryFloor() != evicted {
		t.Fatalf("floor %d after evicting %s, want its last end %d", r.m.HistoryFloor(), pastName(0), evicted)
	}
	if got := f.Encode(); !bytes.Equal(got, snap) {
		t.Fatalf("the state frozen before the eviction encodes unlike its snapshot; first difference at %d", firstDiff(got, snap))
	}
	r.m.Thaw(f)
	checkComplete(t, r.m,
		completeCase{pastName(0), evicted, true}, // its ends up to the floor are lost, none after
		completeCase{pastName(0), evicted - 1, false},
		completeCase{pastName(1), evicted, true}, // one end, after the floor
		completeCase{pastName(1), next, true},
		completeCase{"new", evicted, true},
		completeCase{"other", evicted - 1, false},
	)
	checkComplete(t, below.m,
		completeCase{pastName(0), evicted, false},
		completeCase{pastName(1), lastEndOf(t, below.m, pastName(1)), true},
	)

	snap, err = r.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if restored.HistoryFloor() != evicted || restored.Hash() != r.m.Hash() {
		t.Fatalf("restored: floor %d (want %d), same hash %v", restored.HistoryFloor(), evicted, restored.Hash() == r.m.Hash())
	}
	// The floor is in Hash: the same history with another floor differs.
	floor := r.m.past.floor
	r.m.past.floor++
	if r.m.Hash() == restored.Hash() {
		t.Fatal("a machine with another floor hashes alike")
	}
	r.m.past.floor = floor
	// Fed the same entries, both evict alike and keep the same floor.
	replay := &pastRig{t: t, m: restored, idx: r.idx, s: r.s, seq: r.seq}
	for _, rig := range []*pastRig{r, replay} {
		rig.cycle("newer") // evicts job/00001
	}
	if r.m.HistoryFloor() != next || restored.HistoryFloor() != next || restored.Hash() != r.m.Hash() {
		t.Fatalf("after a second eviction: floors %d and %d, want %d; same hash %v",
			r.m.HistoryFloor(), restored.HistoryFloor(), next, restored.Hash() == r.m.Hash())
	}
}
