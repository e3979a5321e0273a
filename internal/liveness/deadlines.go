package liveness

import (
	"cmp"
	"container/heap"
	"strings"
	"time"
)

// deadline is one entry of the tracker's queue: a session's, a timed
// wait's, a hold limit's, a lock-delay's or a revoked hold's deadline as
// it was when queued. Entries are checked lazily when
// they come due: a heartbeat moves a session's deadline without touching
// the queue, and the stale entry is re-queued at the new deadline when it
// pops; entries of ended sessions and waits are dropped then. So a
// heartbeat costs O(1) and a due check O(log n), whatever the number of
// sessions.
type deadline struct {
	at      time.Time
	wait    bool
	isHold  bool
	isDelay bool
	// isRevoke: a revoked hold's grace (a grace never moves, so it is
	// queued once).
	isRevoke bool
	session  uint64  // when none of wait, isHold, isDelay, isRevoke
	key      waitKey // when wait
	hold     holdKey // when isHold or isRevoke
	lock     string  // when isDelay
}

// deadlines is a min-heap ordered by time, then deterministically
// (revocations after the rest, by hold; lock-delays after the others, by
// lock; holds after sessions and waits;
// sessions before waits, then by id and key) so a manual tracker replays
// exactly.
type deadlines []deadline

func (d deadlines) Len() int { return len(d) }
func (d deadlines) Less(i, j int) bool {
	a, b := d[i], d[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.isRevoke != b.isRevoke {
		return !a.isRevoke
	}
	if a.isRevoke {
		return compareHolds(a.hold, b.hold) < 0
	}
	if a.isDelay != b.isDelay {
		return !a.isDelay
	}
	if a.isDelay {
		return a.lock < b.lock
	}
	if a.isHold != b.isHold {
		return !a.isHold
	}
	if a.isHold {
		return compareHolds(a.hold, b.hold) < 0
	}
	if a.wait != b.wait {
		return !a.wait
	}
	if c := cmp.Compare(a.session, b.session); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.key.lock, b.key.lock); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.key.session, b.key.session); c != 0 {
		return c < 0
	}
	return a.key.seq < b.key.seq
}

// compareHolds orders holds by lock, session and token.
func compareHolds(a, b holdKey) int {
	if c := strings.Compare(a.lock, b.lock); c != 0 {
		return c
	}
	if c := cmp.Compare(a.session, b.session); c != 0 {
		return c
	}
	if c := cmp.Compare(a.token, b.token); c != 0 {
		return c
	}
	return strings.Compare(a.ownerKey, b.ownerKey)
}

func (d deadlines) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)   { *d = append(*d, x.(deadline)) }
func (d *deadlines) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// queueSession and queueWait add an entry; callers hold t.mu.
func (t *Tracker) queueSession(id uint64, at time.Time) {
	heap.Push(&t.queue, deadline{at: at, session: id})
}

func (t *Tracker) queueWait(k waitKey, at time.Time) {
	heap.Push(&t.queue, deadline{at: at, wait: true, key: k})
}

func (t *Tracker) queueHold(k holdKey, at time.Time) {
	heap.Push(&t.queue, deadline{at: at, isHold: true, hold: k})
}

func (t *Tracker) queueDelay(lock string, at time.Time) {
	heap.Push(&t.queue, deadline{at: at, isDelay: true, lock: lock})
}

func (t *Tracker) queueRevoke(k holdKey, at time.Time) {
	heap.Push(&t.queue, deadline{at: at, isRevoke: true, hold: k})
}

// rebuildQueue queues every session, wait, hold, lock-delay and
// revocation afresh (on promotion).
func (t *Tracker) rebuildQueue() {
	t.queue = t.queue[:0]
	for id, s := range t.sessions {
		t.queue = append(t.queue, deadline{at: s.deadline, session: id})
	}
	for k, w := range t.waits {
		t.queue = append(t.queue, deadline{at: w.deadline, wait: true, key: k})
	}
	for k, h := range t.holds {
		t.queue = append(t.queue, deadline{at: h.deadline, isHold: true, hold: k})
	}
	for lock, d := range t.delays {
		t.queue = append(t.queue, deadline{at: d.deadline, isDelay: true, lock: lock})
	}
	for k, r := range t.revokes {
		t.queue = append(t.queue, deadline{at: r.deadline, isRevoke: true, hold: k})
	}
	heap.Init(&t.queue)
}
