package fsm

import (
	"slices"
)

// streamHistory follows, in the randomized stream (model_test.go), every
// end of a hold of each of streamLocks, to check what the history keeps
// of them: from WatchHistoryVersion each end's value (the value the hold
// had before the entry that ended it), and that HistoryComplete never
// says the history holds every end after an index when the model knows
// of one it lost.
//
// The model learns the ends from the history itself, right after each
// entry: the entry's ends are those with its index, the most recent.
// (Should one entry end more holds of a lock than its ring keeps, the
// model misses the ones pushed out; that can hide a wrong answer, never
// make one up.)
type streamHistory struct {
	ends    map[string][]PastHold // of each lock, oldest first
	holders map[holdKey]string    // the holds after the last entry, with their values
}

// holdKey names a hold: its lock, owner key, session and token.
type holdKey struct {
	lock, key      string
	session, token uint64
}

// observeHistory adds the ends the entry just applied recorded to the
// model, checks their values and HistoryComplete's answers for every
// lock, and notes the holds for the next entry.
func (s *stream) observeHistory() {
	h := &s.hist
	if h.ends == nil {
		h.ends, h.holders = make(map[string][]PastHold), make(map[holdKey]string)
	}
	for _, name := range streamLocks {
		kept := s.m.PastHolds(name) // the most recent first
		n := 0
		for n < len(kept) && kept[n].EndedIndex == s.index {
			n++
		}
		for i := n - 1; i >= 0; i-- {
			s.checkEndValue(name, &kept[i])
			h.ends[name] = append(h.ends[name], kept[i])
		}
		s.checkComplete(name, kept)
	}
	clear(h.holders)
	for _, l := range s.m.Locks("", "", 0) {
		for _, hd := range l.GetHolders() {
			h.holders[holdKey{l.GetName(), hd.GetOwnerKey(), hd.GetSessionId(), hd.GetToken()}] = hd.GetValue()
		}
	}
}

// checkEndValue checks the value the history keeps for e, an end of
// name by the entry just applied: the hold's value before it, from
// WatchHistoryVersion, else none.
func (s *stream) checkEndValue(name string, e *PastHold) {
	want, held := "", true
	if s.m.LogVersion() >= WatchHistoryVersion {
		// A hold granted and ended by this one entry was in no state
		// before it: its value is not known here.
		want, held = s.hist.holders[holdKey{name, e.OwnerKey, e.SessionID, e.Token}]
	}
	switch {
	case !held:
		s.stats["history_ends_granted_and_ended"]++
	case e.Value != want:
		s.t.Fatalf("entry %d: the end of %s's hold %+v kept value %q; the hold had %q (log version %d)",
			s.index, name, e, e.Value, want, s.m.LogVersion())
	case want != "":
		s.stats["history_values"]++
	}
}

// checkComplete asks HistoryComplete about name after indexes around
// the floor, the kept ends and the model's latest ends, and checks every
// yes: the history (kept, the most recent first) holds exactly the ends
// the model knows of after that index.
func (s *stream) checkComplete(name string, kept []PastHold) {
	ends := s.hist.ends[name]
	afters := []uint64{0, s.index}
	if f := s.m.HistoryFloor(); f > 0 {
		afters = append(afters, f-1, f)
	}
	for _, e := range kept {
		afters = append(afters, e.EndedIndex-1, e.EndedIndex)
	}
	for _, e := range ends[max(0, len(ends)-PastHoldsPerLock-2):] {
		afters = append(afters, e.EndedIndex-1, e.EndedIndex)
	}
	for _, after := range afters {
		if !s.m.HistoryComplete(name, after) {
			s.stats["history_incomplete"]++
			continue
		}
		s.stats["history_complete"]++
		var want []PastHold // the model's ends after after, the most recent first
		for i := len(ends) - 1; i >= 0 && ends[i].EndedIndex > after && len(want) <= len(kept); i-- {
			want = append(want, ends[i])
		}
		got := kept
		for len(got) > 0 && got[len(got)-1].EndedIndex <= after {
			got = got[:len(got)-1]
		}
		if !slices.Equal(got, want) {
			s.t.Fatalf("entry %d: HistoryComplete(%q, %d) with floor %d, but the history keeps %+v of the ends %+v after it",
				s.index, name, after, s.m.HistoryFloor(), got, want)
		}
	}
}

// checkCompleteAgrees: the machine restored halfway has the same floor
// and answers HistoryComplete as the original.
func (s *stream) checkCompleteAgrees(name string) {
	if got, want := s.restored.HistoryFloor(), s.m.HistoryFloor(); got != want {
		s.t.Fatalf("history floor: the restored machine has %d, the original %d", got, want)
	}
	afters := []uint64{0, s.m.HistoryFloor(), s.index}
	for _, e := range s.m.PastHolds(name) {
		afters = append(afters, e.EndedIndex-1, e.EndedIndex)
	}
	for _, after := range afters {
		if got, want := s.restored.HistoryComplete(name, after), s.m.HistoryComplete(name, after); got != want {
			s.t.Fatalf("HistoryComplete(%q, %d): the restored machine says %v, the original %v", name, after, got, want)
		}
	}
}
