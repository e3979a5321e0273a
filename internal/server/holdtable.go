package server

import (
	"cmp"
	"slices"
)

// holdTable is when each hold began, by session, as lock metrics learn
// it from applied results: a hold's grant comes with its lock and token,
// but its end by a session's close or expiry names only the session, so
// the metrics keep each session's holds to time them and label them by
// prefix. It holds no lock names: 24 bytes a hold (24 MB at a million
// holds) and a record per session that ever held one. Owned by the Ready
// loop (Deliver and Flush), so it has no lock of its own.
type holdTable struct {
	sessions map[uint64]*sessionHolds
}

// sessionHolds are one session's holds, by ascending token: a hold added
// later has a later token (the index of the entry that granted it), so
// adding is an append. An ended hold stays as a tombstone (series nil)
// until they are half the slice, so ending one costs a binary search.
type sessionHolds struct {
	holds       []heldLock
	dead        int
	blacklisted bool // its holds end as blacklisted when it expires
}

// heldLock is one hold: its token, since (the wall clock of the entry
// that granted it, as the state machine keeps it) and its lock's series.
// Holds with the same token (one entry granted them) and series are the
// same to the metrics: ending any one of them is right.
type heldLock struct {
	token  uint64
	since  int64
	series *prefixSeries
}

// reset forgets every hold.
func (t *holdTable) reset() { t.sessions = make(map[uint64]*sessionHolds) }

func (t *holdTable) session(id uint64) *sessionHolds {
	if t.sessions == nil {
		t.reset()
	}
	sh := t.sessions[id]
	if sh == nil {
		sh = &sessionHolds{}
		t.sessions[id] = sh
	}
	return sh
}

// add records a hold of session. Its token is above the session's other
// holds' unless the table is being filled from a state (then sortAll
// puts them in order).
func (t *holdTable) add(session, token uint64, since int64, ps *prefixSeries) {
	sh := t.session(session)
	sh.holds = append(sh.holds, heldLock{token: token, since: since, series: ps})
}

// sortAll puts every session's holds in token order.
func (t *holdTable) sortAll() {
	for _, sh := range t.sessions {
		slices.SortFunc(sh.holds, func(a, b heldLock) int { return cmp.Compare(a.token, b.token) })
	}
}

// blacklist marks session blacklisted.
func (t *holdTable) blacklist(session uint64) { t.session(session).blacklisted = true }

// end forgets the hold of session with token and series and returns its
// since; false if the table does not have it (it began before the table
// was filled, or a retried release already ended it).
func (t *holdTable) end(session, token uint64, ps *prefixSeries) (int64, bool) {
	sh := t.sessions[session]
	if sh == nil {
		return 0, false
	}
	i, _ := slices.BinarySearchFunc(sh.holds, token, func(h heldLock, token uint64) int { return cmp.Compare(h.token, token) })
	for ; i < len(sh.holds) && sh.holds[i].token == token; i++ {
		if h := &sh.holds[i]; h.series == ps {
			since := h.since
			h.series = nil
			sh.dead++
			sh.compact()
			return since, true
		}
	}
	return 0, false
}

// compact drops the tombstones once they are half the holds, and gives
// back most of the array of a session that let go of many holds.
func (sh *sessionHolds) compact() {
	if sh.dead*2 < len(sh.holds) {
		return
	}
	sh.holds = slices.DeleteFunc(sh.holds, func(h heldLock) bool { return h.series == nil })
	sh.dead = 0
	if c := cap(sh.holds); c > 64 && len(sh.holds) < c/4 {
		sh.holds = append(make([]heldLock, 0, 2*len(sh.holds)), sh.holds...)
	}
}

// endSession forgets session and returns its holds and whether it was
// blacklisted. The holds are the caller's.
func (t *holdTable) endSession(session uint64) ([]heldLock, bool) {
	sh := t.sessions[session]
	if sh == nil {
		return nil, false
	}
	delete(t.sessions, session)
	live := slices.DeleteFunc(sh.holds, func(h heldLock) bool { return h.series == nil })
	return live, sh.blacklisted
}
