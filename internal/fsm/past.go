package fsm

// The recent history of holds: who held a lock before, from when to when,
// and how the hold ended (LESSONS.md 12). It is for people, like a hold's
// since: nothing is decided by it.
//
// The history is bounded: PastHoldsPerLock ends for each of the PastLocks
// locks that ended a hold most recently. A lock's oldest end makes room
// for its next one; the lock whose last end is the oldest makes room for
// a lock not yet in the history (of locks whose holds one entry ended,
// the one recorded first goes first). What is recorded and what goes
// depends on the log alone, so members that applied the same entries to
// the same history hold the same one.
//
// From log version HistoryVersion the history is replicated state: it is
// in snapshots (Snapshot.history, in the order locks are evicted) and so
// in Hash, and a member restarted from its snapshot, one that replayed
// the log and one that installed the leader's snapshot tell the same. A
// cluster below that version (not every member runs a release that reads
// it) keeps it as releases before it did: in memory only, outside
// snapshots and Hash, so a member has the ends it applied since it
// started or last restored a snapshot, and a member of this release
// encodes the same snapshot bytes as one of an older release. The entry
// that raises the cluster to HistoryVersion empties every member's
// history (SetLogVersion): until then each had its own; from that entry
// on, all record the same ends into the same empty history.
//
// From log version WatchHistoryVersion an end keeps its hold's value,
// and the history has a floor: the index at and below which it may have
// lost ends. A lock's ring drops only its oldest end, to make room for a
// ninth, so a ring that is not full holds every end of its lock since
// its record was made. The lock's ends before that were in an earlier
// record of it, evicted whole (the floor is then at least that record's
// last end), or were not tracked (they came before the entry that
// raised the cluster to WatchHistoryVersion, where the floor starts).
// HistoryComplete tells a watch that fills in a gap from the history
// whether it has every end it missed. The floor is in snapshots
// (Snapshot.history_floor) and Hash from that version.

// Bounds of the history: at most PastLocks*PastHoldsPerLock ends.
const (
	PastHoldsPerLock = 8
	PastLocks        = 4096
)

// HistoryVersion is the log version from which the history is in
// snapshots and Hash (see above).
const HistoryVersion = 10

// HoldEnd says how a hold ended. Its values are fsmpb.HoldEnd's.
type HoldEnd uint8

// How holds end.
const (
	EndReleased       HoldEnd = iota + 1 // its session released it
	EndSessionClosed                     // its session closed
	EndSessionExpired                    // its session expired (or was blacklisted, then expired)
	EndHoldExpired                       // its hold limit passed unrenewed
	EndCasReleased                       // an operator's CasRelease
	EndAbandoned                         // granted to a wait whose caller had gone away
	EndRevoked                           // a revocation's grace passed before its holder let go
)

var holdEndNames = [...]string{"", "released", "session closed", "session expired", "hold limit expired", "cas-released", "abandoned", "revoked"}

func (e HoldEnd) String() string {
	if int(e) < len(holdEndNames) && e != 0 {
		return holdEndNames[e]
	}
	return "unknown"
}

// PastHold is a hold that ended. Times are the wall clocks of the leaders
// that proposed the granting and the ending entries.
type PastHold struct {
	SessionID  uint64
	Owner      string
	OwnerKey   string
	Token      uint64
	Shared     bool
	Since      int64 // unix nanoseconds
	Ended      int64 // unix nanoseconds
	EndedIndex uint64
	How        HoldEnd
	// Value is the hold's value when it ended (what an election's leader
	// had published), from WatchHistoryVersion; "" below it, and for a
	// hold that had none.
	Value string
}

// pastLock is one lock's history: a ring of its last ends, and its place
// in the list of locks by their last end (most recent first).
//
// A Frozen state (frozen.go) keeps the pastLocks of its freeze and reads
// their name and ring while Apply goes on: Apply writes those only in a
// pastLock of the current epoch, and copies a frozen one first
// (changePast). It changes the list links (prev, succ) of any pastLock,
// which the frozen state never reads.
type pastLock struct {
	name       string
	holds      [PastHoldsPerLock]PastHold
	n, next    int    // how many are kept; where the next one goes
	epoch      uint64 // the freeze epoch it was made in
	prev, succ *pastLock
}

// past is the history of every lock: a map, and a list for evicting the
// lock whose last end is the oldest.
type past struct {
	locks      map[string]*pastLock
	head, tail *pastLock // head: the most recent
	// floor is the index at and below which ends may be missing from
	// the history (see above); kept from WatchHistoryVersion, else 0.
	floor uint64
}

// historyReplicated reports whether the history is in snapshots and Hash.
func (m *Machine) historyReplicated() bool { return m.logVersion >= HistoryVersion }

// HistoryReplicated reports whether the history is replicated state (the
// cluster's log version is HistoryVersion or above): if not, it is this
// member's own since it started or last restored a snapshot.
func (m *Machine) HistoryReplicated() bool { return m.historyReplicated() }

// recordEnd adds the end of hold h of l, by the entry being applied. It
// is called before h leaves l, while l still has h's value.
func (m *Machine) recordEnd(a *apply, l *lock, h *holder, how HoldEnd) {
	p := &m.past
	if p.locks == nil {
		p.locks = make(map[string]*pastLock)
	}
	pl := p.locks[l.name]
	if pl == nil {
		if len(p.locks) >= PastLocks {
			// The lock whose last end is the oldest goes; its record
			// is reused unless a frozen state reads it.
			pl = p.tail
			p.unlink(pl)
			delete(p.locks, pl.name)
			if m.logVersion >= WatchHistoryVersion {
				// Its ends are lost, the last one the newest.
				p.floor = max(p.floor, pl.lastEnd().EndedIndex)
			}
			if m.freezesPast(pl) {
				pl = &pastLock{}
			} else {
				*pl = pastLock{}
			}
		} else {
			pl = &pastLock{}
		}
		pl.name, pl.epoch = l.name, m.epoch
		p.locks[l.name] = pl
	} else {
		pl = m.changePast(pl)
		p.unlink(pl)
	}
	p.pushFront(pl)
	var value string
	if m.logVersion >= WatchHistoryVersion {
		// Below it no member records a value: a snapshot of an older
		// version keeps the bytes older releases encode.
		value = l.holderValue(h)
	}
	pl.holds[pl.next] = PastHold{
		SessionID: h.s.id, Owner: h.s.owner, OwnerKey: h.ownerKey, Token: h.token, Shared: h.shared,
		Since: h.since, Ended: a.wall, EndedIndex: a.index, How: how, Value: value,
	}
	pl.next = (pl.next + 1) % PastHoldsPerLock
	pl.n = min(pl.n+1, PastHoldsPerLock)
}

// freezesPast reports whether the frozen state, if any, reads pl.
func (m *Machine) freezesPast(pl *pastLock) bool {
	return m.frozen != nil && m.frozen.past != nil && pl.epoch != m.epoch
}

// changePast is called before a change to pl's name or ring: while the
// frozen state reads pl, it is replaced, in the list and the map, by a
// copy of the current epoch, which it returns.
func (m *Machine) changePast(pl *pastLock) *pastLock {
	if !m.freezesPast(pl) {
		return pl
	}
	p := &m.past
	c := &pastLock{name: pl.name, holds: pl.holds, n: pl.n, next: pl.next, epoch: m.epoch, prev: pl.prev, succ: pl.succ}
	if c.prev != nil {
		c.prev.succ = c
	} else {
		p.head = c
	}
	if c.succ != nil {
		c.succ.prev = c
	} else {
		p.tail = c
	}
	p.locks[c.name] = c
	return c
}

func (p *past) unlink(pl *pastLock) {
	if pl.prev != nil {
		pl.prev.succ = pl.succ
	} else {
		p.head = pl.succ
	}
	if pl.succ != nil {
		pl.succ.prev = pl.prev
	} else {
		p.tail = pl.prev
	}
	pl.prev, pl.succ = nil, nil
}

func (p *past) pushFront(pl *pastLock) {
	pl.succ = p.head
	if p.head != nil {
		p.head.prev = pl
	}
	p.head = pl
	if p.tail == nil {
		p.tail = pl
	}
}

// inEvictionOrder returns the locks of the history, the one whose last
// end is the oldest first: the order of Snapshot.history.
func (p *past) inEvictionOrder() []*pastLock {
	out := make([]*pastLock, 0, len(p.locks))
	for pl := p.tail; pl != nil; pl = pl.prev {
		out = append(out, pl)
	}
	return out
}

// lastEnd returns pl's most recent end (pl.n >= 1).
func (pl *pastLock) lastEnd() *PastHold {
	return &pl.holds[(pl.next-1+PastHoldsPerLock)%PastHoldsPerLock]
}

// ends returns pl's ends, the oldest first when oldestFirst, else the
// most recent first.
func (pl *pastLock) ends(oldestFirst bool) []PastHold {
	out := make([]PastHold, 0, pl.n)
	for i := 1; i <= pl.n; i++ {
		out = append(out, pl.holds[(pl.next-i+PastHoldsPerLock)%PastHoldsPerLock])
	}
	if oldestFirst {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// PastHolds returns the recent ends of holds of lock name, the most recent
// first (at most PastHoldsPerLock). HistoryReplicated says whether every
// member tells the same at this applied index.
func (m *Machine) PastHolds(name string) []PastHold {
	pl := m.past.locks[name]
	if pl == nil {
		return nil
	}
	return pl.ends(false)
}

// HistoryComplete reports whether PastHolds(name) holds every end of a
// hold of name recorded after index after (EndedIndex > after): what a
// watch that fills in the ends it missed since after needs to know. It
// does when some end it holds ended at or before after (a lock's ends
// after its oldest kept one are all kept). Else, from log version
// WatchHistoryVersion, it does when name's ring is not full (none of its
// ends pushed out; a lock with no history has none) and after is at or
// above the history's floor (no end after it lost with a whole lock's
// history, nor from before the version was raised). Else ends may be
// missing, and it reports false. It tells the same on every member from
// HistoryVersion (see HistoryReplicated).
func (m *Machine) HistoryComplete(name string, after uint64) bool {
	pl := m.past.locks[name]
	if pl != nil && pl.oldest(0).EndedIndex <= after {
		return true
	}
	n := 0
	if pl != nil {
		n = pl.n
	}
	return m.logVersion >= WatchHistoryVersion && n < PastHoldsPerLock && after >= m.past.floor
}

// HistoryFloor is the index at and below which the history may have lost
// ends (see HistoryComplete); 0 below WatchHistoryVersion.
func (m *Machine) HistoryFloor() uint64 { return m.past.floor }
