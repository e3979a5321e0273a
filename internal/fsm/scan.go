package fsm

// Walks of every lock and hold for the API's metrics: they copy nothing
// and allocate nothing per lock, so that a member can read its whole
// state every scrape.

// EachHold calls f with every hold, by lock name: the lock, the holding
// session, the hold's token and since (the wall clock of the entry that
// granted it). f must not keep lock past the call if it needs it after
// the state changes (lock is the state's own string).
func (m *Machine) EachHold(f func(lock string, session, token uint64, since int64)) {
	m.lockTree.Ascend(func(l *lockState) bool {
		for i := range l.holders {
			h := &l.holders[i]
			f(l.name, h.s.id, h.token, h.since)
		}
		return true
	})
}

// ScanLocks calls f with at most limit locks (all if limit <= 0) whose
// names sort after after, in ascending name order: each lock's name, its
// number of holders, the since of its oldest hold (0 without holders: it
// only has waiters) and its number of waiters. It returns the last name it passed to f, ""
// when it passed none: the after of the next call. The caller holding
// the state's lock only for one call at a time lets Apply run between
// calls, so a walk of many calls is not one point in time.
func (m *Machine) ScanLocks(after string, limit int, f func(name string, holders int, oldestSince int64, waiters int)) string {
	last := ""
	n := 0
	visit := func(l *lockState) bool {
		if limit > 0 && n >= limit {
			return false
		}
		var oldest int64
		for i := range l.holders {
			if s := l.holders[i].since; i == 0 || s < oldest {
				oldest = s
			}
		}
		f(l.name, len(l.holders), oldest, len(l.waiters()))
		last = l.name
		n++
		return true
	}
	if after == "" {
		m.lockTree.Ascend(visit)
	} else {
		m.lockTree.AscendGreaterOrEqual(&lockState{name: after + "\x00"}, visit)
	}
	return last
}
