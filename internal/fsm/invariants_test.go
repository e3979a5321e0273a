package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
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

// checkValues: every value of l belongs to one of its holders or
// waiters (one that left took its value along), at most one to each, and
// each is one rules.CheckHoldValue admits.
func checkValues(l *lockState) error {
	if l.queue == nil {
		return nil
	}
	for i, v := range l.queue.values {
		owned := false
		for _, h := range l.holders {
			owned = owned || (h.s == v.s && h.ownerKey == v.ownerKey && h.acquireSeq == v.seq)
		}
		for _, w := range l.waiters() {
			owned = owned || (w.s == v.s && w.ownerKey == v.ownerKey && w.acquireSeq == v.seq)
		}
		if !owned || v.value == "" || rules.CheckHoldValue(v.value) != nil {
			return fmt.Errorf("lock %q has value %q of session %d key %q seq %d, which no holder or waiter of it has or may have",
				l.name, v.value, v.s.id, v.ownerKey, v.seq)
		}
		for _, u := range l.queue.values[:i] {
			if u.s == v.s && u.ownerKey == v.ownerKey && u.seq == v.seq {
				return fmt.Errorf("lock %q has two values of session %d key %q seq %d", l.name, v.s.id, v.ownerKey, v.seq)
			}
		}
	}
	return nil
}

// checkIndexes is checkInvariants without the round trip.
func checkIndexes(m *Machine) error {
	if m.lockTree.Len() != len(m.locks) || m.sessionTree.Len() != len(m.sessions) {
		return fmt.Errorf("sorted indexes have %d locks / %d sessions, maps %d / %d",
			m.lockTree.Len(), m.sessionTree.Len(), len(m.locks), len(m.sessions))
	}
	// Open nonces: the index holds exactly the live sessions that have one.
	nonces := 0
	for id, s := range m.sessions {
		if s.nonce != 0 {
			nonces++
			if m.opens[s.nonce] != s {
				return fmt.Errorf("session %d has open nonce %d, which the index does not give it", id, s.nonce)
			}
		}
	}
	if len(m.opens) != nonces {
		return fmt.Errorf("the open nonce index has %d entries for %d sessions with a nonce", len(m.opens), nonces)
	}
	// Sessions per principal: the counts are exactly the live sessions'.
	byPrincipal := make(map[string]int)
	for _, s := range m.sessions {
		if s.principal != "" {
			byPrincipal[s.principal]++
		}
	}
	if !maps.Equal(byPrincipal, m.byPrincipal) {
		return fmt.Errorf("sessions per principal are counted %v; the sessions say %v", m.byPrincipal, byPrincipal)
	}
	for p, n := range byPrincipal {
		if got := m.NumSessionsOf(p); got != n {
			return fmt.Errorf("NumSessionsOf(%q) = %d; the sessions say %d", p, got, n)
		}
	}
	holds := make(map[uint64]map[string]uint32)
	waits := make(map[uint64]map[waitKey]string) // each waiter's owner key
	idxSeen := make(map[*session]map[int32]bool)
	for name, l := range m.locks {
		if got, ok := m.lockTree.Get(l.lockState); !ok || got != l.lockState || l.name != name {
			return fmt.Errorf("lock %q: the name index does not have its current state", name)
		}
		// At most limit holders; an exclusive one alone (DESIGN.md 5.1:
		// never a writer beside a reader).
		limit := l.limit()
		if limit == 0 || limit > rules.MaxHoldersPerLock || uint32(len(l.holders)) > limit {
			return fmt.Errorf("lock %q has %d holders, limit %d", name, len(l.holders), limit)
		}
		for _, h := range l.holders {
			if uint32(h.limit) != limit || (!h.shared && len(l.holders) > 1) {
				return fmt.Errorf("lock %q: holder %+v beside %d others, lock limit %d", name, h, len(l.holders)-1, limit)
			}
		}
		for _, w := range l.waiters() {
			if uint32(w.limit) != limit {
				return fmt.Errorf("lock %q: waiter %+v, lock limit %d", name, w, limit)
			}
		}
		// A lock exists while it has a holder, a waiter or a lock-delay,
		// and a waiter that fits waits only for a lock-delay.
		d := l.delay()
		if len(l.holders) == 0 && len(l.waiters()) == 0 && d.from == 0 {
			return fmt.Errorf("lock %q is empty but exists", name)
		}
		if ws := l.waiters(); len(ws) > 0 && d.from == 0 && l.grantable(&ws[0]) {
			return fmt.Errorf("lock %q has room for its first of %d waiters", name, len(ws))
		}
		if d.from > m.applied || (d.from == 0) != (d.nanos == 0) || d.nanos < 0 || d.nanos > int64(rules.MaxLockDelay) {
			return fmt.Errorf("lock %q has a bad lock-delay %+v", name, d)
		}
		for _, h := range l.holders {
			if h.s == nil || m.sessions[h.s.id] != h.s {
				return fmt.Errorf("lock %q held by a missing session", name)
			}
			if h.count == 0 || h.token == 0 || h.token > m.applied {
				return fmt.Errorf("lock %q has a bad holder %+v", name, h)
			}
			if int(h.idx) >= len(h.s.held) || h.s.held[h.idx] != l || idxSeen[h.s][h.idx] {
				return fmt.Errorf("lock %q: holder of session %d has index %d, which is not this lock's or is taken", name, h.s.id, h.idx)
			}
			if idxSeen[h.s] == nil {
				idxSeen[h.s] = make(map[int32]bool)
			}
			idxSeen[h.s][h.idx] = true
			if holds[h.s.id] == nil {
				holds[h.s.id] = make(map[string]uint32)
			}
			holds[h.s.id][name]++
		}
		for _, w := range l.waiters() {
			s := w.s
			if s == nil || m.sessions[s.id] != s || s.blacklisted {
				return fmt.Errorf("lock %q has a waiter of a missing or blacklisted session", name)
			}
			if waits[s.id] == nil {
				waits[s.id] = make(map[waitKey]string)
			}
			k := waitKey{name, w.acquireSeq}
			if _, dup := waits[s.id][k]; dup {
				return fmt.Errorf("lock %q has waiter %v twice", name, k)
			}
			waits[s.id][k] = w.ownerKey
		}
		if err := checkValues(l.lockState); err != nil {
			return err
		}
	}
	for id, s := range m.sessions {
		if got, ok := m.sessionTree.Get(&sessionState{sess: &session{id: id}}); !ok || got != s.sessionState || s.id != id || s.sess != s {
			return fmt.Errorf("session %d: the id index does not have its current state", id)
		}
		// s.held lists the lock of each of its holder records.
		n := 0
		for _, c := range holds[id] {
			n += int(c)
		}
		if n != s.numHolds() {
			return fmt.Errorf("session %d indexes %d holds; the locks say %d", id, s.numHolds(), n)
		}
		if len(s.held) != s.numHolds() {
			return fmt.Errorf("session %d lists %d holds; its state counts %d", id, len(s.held), s.numHolds())
		}
		counted := make(map[string]uint32)
		for _, l := range s.held {
			if m.locks[l.name] != l {
				return fmt.Errorf("session %d indexes a hold of a deleted lock %q", id, l.name)
			}
			counted[l.name]++
		}
		for name, c := range holds[id] {
			if counted[name] != c {
				return fmt.Errorf("session %d hold index disagrees on lock %q", id, name)
			}
		}
		refs := m.HoldsOf(id)
		if len(refs) != s.numHolds() {
			return fmt.Errorf("session %d: HoldsOf lists %d holds, it has %d", id, len(refs), s.numHolds())
		}
		for _, r := range refs {
			l := m.locks[r.Lock]
			if l == nil || l.holderOf(s, r.OwnerKey) == nil || l.holderOf(s, r.OwnerKey).token != r.Token {
				return fmt.Errorf("session %d: HoldsOf lists %+v, which it does not hold", id, r)
			}
		}
		if s.waits != nil && len(s.waits) == 0 {
			return fmt.Errorf("session %d keeps an empty wait index", id)
		}
		if len(waits[id]) != len(s.waits) {
			return fmt.Errorf("session %d indexes %d waits; the locks say %d", id, len(s.waits), len(waits[id]))
		}
		for k, key := range waits[id] {
			if got, ok := s.waits[k]; !ok {
				return fmt.Errorf("session %d wait index lacks %v", id, k)
			} else if got.key != key {
				return fmt.Errorf("session %d wait index has owner key %q for %v; its waiter has %q", id, got.key, k, key)
			}
		}
		if err := checkKeyWaits(s); err != nil {
			return fmt.Errorf("session %d: %v", id, err)
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
		}
	}
	return nil
}

// checkRoundTrip checks that Snapshot gives the bytes proto.Marshal gives
// the whole fsmpb.Snapshot message (built by fullSnapshot), and that
// Snapshot -> Restore -> Snapshot gives the same bytes and a consistent
// machine.
func checkRoundTrip(m *Machine) error {
	b1, err := m.Snapshot()
	if err != nil {
		return err
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(fullSnapshot(m))
	if err != nil {
		return err
	}
	if !bytes.Equal(b1, want) {
		return fmt.Errorf("snapshot differs from the marshalled fsmpb.Snapshot (%d vs %d bytes)", len(b1), len(want))
	}
	r := New()
	if err := r.Restore(b1); err != nil {
		return err
	}
	if err := checkIndexes(r); err != nil {
		return fmt.Errorf("restored machine: %w", err)
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

// fullSnapshot builds the whole state as one fsmpb.Snapshot message, the
// way Snapshot did before it encoded one record at a time.
func fullSnapshot(m *Machine) *fsmpb.Snapshot {
	snap := &fsmpb.Snapshot{AppliedIndex: m.applied}
	m.sessionTree.Ascend(func(s *sessionState) bool {
		p := &fsmpb.Session{}
		s.fill(p, nil, true)
		snap.Sessions = append(snap.Sessions, p)
		return true
	})
	m.lockTree.Ascend(func(l *lockState) bool {
		snap.Locks = append(snap.Locks, l.toProto())
		return true
	})
	for _, mb := range m.Members() {
		snap.Members = append(snap.Members, &fsmpb.Member{Id: mb.ID, Name: mb.Name, PeerAddr: mb.PeerAddr, Removed: mb.Removed})
	}
	snap.ClusterId = m.ClusterID()
	snap.LogVersion = m.logVersion
	if m.auth.enabled || len(m.auth.users) > 0 || len(m.auth.roles) > 0 {
		snap.Auth = m.authProto()
	}
	snap.Audit = m.AuditRecords()
	snap.SigningKeys = m.signingKeysProto()
	if m.historyReplicated() {
		snap.History = historyProto(m)
	}
	if m.logVersion >= WatchHistoryVersion {
		snap.HistoryFloor = m.past.floor
	}
	return snap
}

// historyProto is the history as Snapshot.history keeps it: the lock
// whose last end is the oldest first, each one's ends oldest first.
func historyProto(m *Machine) []*fsmpb.LockHistory {
	var out []*fsmpb.LockHistory
	for _, pl := range m.past.inEvictionOrder() {
		lh := &fsmpb.LockHistory{Lock: pl.name}
		for _, e := range pl.ends(true) {
			lh.Holds = append(lh.Holds, &fsmpb.PastHold{SessionId: e.SessionID, Owner: e.Owner, OwnerKey: e.OwnerKey,
				Token: e.Token, Shared: e.Shared, SinceUnixNano: e.Since, EndedUnixNano: e.Ended, EndedIndex: e.EndedIndex,
				How: fsmpb.HoldEnd(e.How), Value: e.Value})
		}
		out = append(out, lh)
	}
	return out
}

// checkKeyWaits checks session s's index of waits by owner key: kept
// exactly while it has manyWaits waits or more, or had since its waits
// were last none, and then holding each wait once, under its key, at the
// place its entry says.
func checkKeyWaits(s *session) error {
	if s.keyWaits == nil {
		if len(s.waits) >= manyWaits {
			return fmt.Errorf("%d waits and no index by owner key", len(s.waits))
		}
		return nil
	}
	if len(s.waits) == 0 {
		return fmt.Errorf("an index by owner key and no waits")
	}
	n := 0
	for key, ks := range s.keyWaits {
		if len(ks) == 0 {
			return fmt.Errorf("owner key %q has an empty list of waits", key)
		}
		for i, k := range ks {
			if e, ok := s.waits[k]; !ok || e.key != key || int(e.at) != i {
				return fmt.Errorf("owner key %q lists %v at %d; the index has %+v (%v)", key, k, i, e, ok)
			}
		}
		n += len(ks)
	}
	if n != len(s.waits) {
		return fmt.Errorf("the index by owner key lists %d waits; the session has %d", n, len(s.waits))
	}
	return nil
}
