package fsm

// The recent history of holds: who held a lock before, from when to when,
// and how the hold ended (LESSONS.md 12). It is for people, like a hold's
// since: nothing is decided by it.
//
// The history is bounded (PastHoldsPerLock ends for each of the
// PastLocks locks that ended a hold most recently) and kept in memory
// only: it is not part of snapshots or of Hash, so a member has the ends
// it applied itself since it started or last restored a snapshot (a
// restart replays the log after its snapshot, and those ends come back).

// Bounds of the history.
const (
	PastHoldsPerLock = 8
	PastLocks        = 4096
)

// HoldEnd says how a hold ended.
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
}

// pastLock is one lock's history: a ring of its last ends, and its place
// in the list of locks by their last end (most recent first).
type pastLock struct {
	name       string
	holds      [PastHoldsPerLock]PastHold
	n, next    int // how many are kept; where the next one goes
	prev, succ *pastLock
}

// past is the history of every lock: a map, and a list for evicting the
// lock whose last end is the oldest.
type past struct {
	locks      map[string]*pastLock
	head, tail *pastLock // head: the most recent
}

// recordEnd adds the end of hold h of l, by the entry being applied.
func (m *Machine) recordEnd(a *apply, l *lock, h *holder, how HoldEnd) {
	p := &m.past
	if p.locks == nil {
		p.locks = make(map[string]*pastLock)
	}
	pl := p.locks[l.name]
	if pl == nil {
		if len(p.locks) >= PastLocks {
			// The lock whose last end is the oldest goes; its record
			// is reused.
			pl = p.tail
			p.unlink(pl)
			delete(p.locks, pl.name)
			*pl = pastLock{}
		} else {
			pl = &pastLock{}
		}
		pl.name = l.name
		p.locks[l.name] = pl
	} else {
		p.unlink(pl)
	}
	p.pushFront(pl)
	pl.holds[pl.next] = PastHold{
		SessionID: h.s.id, Owner: h.s.owner, OwnerKey: h.ownerKey, Token: h.token, Shared: h.shared,
		Since: h.since, Ended: a.wall, EndedIndex: a.index, How: how,
	}
	pl.next = (pl.next + 1) % PastHoldsPerLock
	pl.n = min(pl.n+1, PastHoldsPerLock)
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

// PastHolds returns the recent ends of holds of lock name, the most recent
// first (at most PastHoldsPerLock), as this member applied them.
func (m *Machine) PastHolds(name string) []PastHold {
	pl := m.past.locks[name]
	if pl == nil {
		return nil
	}
	out := make([]PastHold, 0, pl.n)
	for i := 1; i <= pl.n; i++ {
		out = append(out, pl.holds[(pl.next-i+PastHoldsPerLock)%PastHoldsPerLock])
	}
	return out
}
