package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// checkInvariants returns an error describing the first broken invariant of
// m, or nil. It looks at the private state, so the indexes are checked
// against the locks they index, and it round-trips m through
// Snapshot/Restore.
func checkInvariants(m *Machine) error {
	if err := checkIndexes(m); err != nil {
		return err
	}
	return checkRoundTrip(m)
}

// checkIndexes is checkInvariants without the round trip.
func checkIndexes(m *Machine) error {
	if m.lockNames.Len() != len(m.locks) || m.sessionIDs.Len() != len(m.sessions) {
		return fmt.Errorf("sorted indexes have %d locks / %d sessions, maps %d / %d",
			m.lockNames.Len(), m.sessionIDs.Len(), len(m.locks), len(m.sessions))
	}
	holds := make(map[uint64]map[string]uint32)
	waits := make(map[uint64]map[waitKey]struct{})
	for name, l := range m.locks {
		if !m.lockNames.Has(name) || l.name != name {
			return fmt.Errorf("lock %q missing from the name index", name)
		}
		if len(l.holders) > holderLimit {
			return fmt.Errorf("lock %q has %d holders", name, len(l.holders))
		}
		if len(l.holders) == 0 && len(l.waiters) == 0 {
			return fmt.Errorf("lock %q is empty but exists", name)
		}
		if len(l.waiters) > 0 && l.free() {
			return fmt.Errorf("lock %q is free but has %d waiters", name, len(l.waiters))
		}
		for _, h := range l.holders {
			if m.sessions[h.GetSessionId()] == nil {
				return fmt.Errorf("lock %q held by missing session %d", name, h.GetSessionId())
			}
			if h.GetCount() == 0 || h.GetToken() == 0 || h.GetToken() > m.applied {
				return fmt.Errorf("lock %q has a bad holder %v", name, h)
			}
			if holds[h.GetSessionId()] == nil {
				holds[h.GetSessionId()] = make(map[string]uint32)
			}
			holds[h.GetSessionId()][name]++
		}
		for _, w := range l.waiters {
			s := m.sessions[w.GetSessionId()]
			if s == nil || s.blacklisted {
				return fmt.Errorf("lock %q has a waiter of missing or blacklisted session %d", name, w.GetSessionId())
			}
			if waits[s.id] == nil {
				waits[s.id] = make(map[waitKey]struct{})
			}
			k := waitKey{name, w.GetAcquireSeq()}
			if _, dup := waits[s.id][k]; dup {
				return fmt.Errorf("lock %q has waiter %v twice", name, k)
			}
			waits[s.id][k] = struct{}{}
		}
	}
	for id, s := range m.sessions {
		if !m.sessionIDs.Has(id) || s.id != id {
			return fmt.Errorf("session %d missing from the id index", id)
		}
		n := 0
		for _, c := range holds[id] {
			n += int(c)
		}
		if n != s.numHolds || len(holds[id]) != len(s.holds) {
			return fmt.Errorf("session %d counts %d holds on %d locks; the locks say %d on %d",
				id, s.numHolds, len(s.holds), n, len(holds[id]))
		}
		for name, c := range holds[id] {
			if s.holds[name] != c {
				return fmt.Errorf("session %d hold index disagrees on lock %q", id, name)
			}
		}
		if len(waits[id]) != len(s.waits) {
			return fmt.Errorf("session %d indexes %d waits; the locks say %d", id, len(s.waits), len(waits[id]))
		}
		for k := range waits[id] {
			if _, ok := s.waits[k]; !ok {
				return fmt.Errorf("session %d wait index lacks %v", id, k)
			}
		}
		if s.load() > MaxHoldsPerSession {
			return fmt.Errorf("session %d has %d holds and waits", id, s.load())
		}
		if len(s.results) > MaxPending {
			return fmt.Errorf("session %d caches %d results", id, len(s.results))
		}
		if !slices.IsSortedFunc(s.results, func(a, b cachedResult) int { return cmp.Compare(a.seq, b.seq) }) {
			return fmt.Errorf("session %d results not sorted", id)
		}
		for i, c := range s.results {
			if c.seq < s.minUnacked || (i > 0 && c.seq <= s.results[i-1].seq) {
				return fmt.Errorf("session %d caches seq %d (min unacked %d)", id, c.seq, s.minUnacked)
			}
			if len(c.res.GetGrants())+len(c.res.GetWaitsEnded())+len(c.res.GetSessionsEnded()) > 0 {
				return fmt.Errorf("session %d caches side effects for seq %d", id, c.seq)
			}
		}
	}
	return nil
}

// checkRoundTrip checks that Snapshot -> Restore -> Snapshot gives the same
// bytes.
func checkRoundTrip(m *Machine) error {
	b1, err := m.Snapshot()
	if err != nil {
		return err
	}
	r := New()
	if err := r.Restore(b1); err != nil {
		return err
	}
	b2, err := r.Snapshot()
	if err != nil {
		return err
	}
	if !bytes.Equal(b1, b2) {
		return fmt.Errorf("snapshot of the restored machine differs (%d vs %d bytes)", len(b1), len(b2))
	}
	return nil
}
