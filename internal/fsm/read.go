package fsm

import (
	"math"
	"strings"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Reads. Each returns fresh copies the caller may keep and modify.

// Session returns session id without its cached results, and whether it
// exists.
func (m *Machine) Session(id uint64) (*fsmpb.Session, bool) {
	s := m.sessions[id]
	if s == nil {
		return nil, false
	}
	return s.toProto(), true
}

// Sessions returns the sessions with id > afterID in ascending id order,
// without their cached results, at most limit of them (all if limit <= 0).
// Pass the last id of one page as afterID to get the next.
func (m *Machine) Sessions(afterID uint64, limit int) []*fsmpb.Session {
	var out []*fsmpb.Session
	if afterID == math.MaxUint64 {
		return nil
	}
	m.sessionTree.AscendGreaterOrEqual(&sessionState{sess: &session{id: afterID + 1}}, func(s *sessionState) bool {
		if limit > 0 && len(out) >= limit {
			return false
		}
		out = append(out, s.toProto())
		return true
	})
	return out
}

// Lock returns lock name with its holders and waiters (in queue order), and
// whether it exists. A lock exists while it has a holder or a waiter.
func (m *Machine) Lock(name string) (*fsmpb.Lock, bool) {
	l := m.locks[name]
	if l == nil {
		return nil, false
	}
	return l.toProto(), true
}

// Locks returns the locks whose name starts with prefix and sorts after
// after, in ascending name order, at most limit of them (all if limit <= 0).
// Pass the last name of one page as after to get the next.
func (m *Machine) Locks(prefix, after string, limit int) []*fsmpb.Lock {
	var out []*fsmpb.Lock
	start := prefix
	if after >= start {
		start = after + "\x00" // the smallest string above after
	}
	m.lockTree.AscendGreaterOrEqual(&lockState{name: start}, func(l *lockState) bool {
		if !strings.HasPrefix(l.name, prefix) || (limit > 0 && len(out) >= limit) {
			return false
		}
		out = append(out, l.toProto())
		return true
	})
	return out
}

// Check reports whether token is the token of a current hold of lock name
// (for resources that cannot keep fencing state themselves). holder is the
// hold with that token if held, otherwise the lock's current holder, or nil
// if nobody holds it.
func (m *Machine) Check(name string, token uint64) (held bool, holder *fsmpb.Holder) {
	l := m.locks[name]
	if l == nil || len(l.holders) == 0 {
		return false, nil
	}
	for i := range l.holders {
		if h := &l.holders[i]; token != 0 && h.token == token {
			return true, h.toProto(nil)
		}
	}
	return false, l.holders[0].toProto(nil)
}

// WaiterRef names one queued waiter that has a wait timeout.
type WaiterRef struct {
	Lock         string
	SessionID    uint64
	AcquireSeq   uint64
	TimeoutNanos int64
}

// Waiters returns every queued waiter with a wait timeout, by lock name and
// then queue order. A new leader uses it to arm the timers that end those
// waits with CancelWait (timed_out); it starts each with the full timeout,
// since it cannot know how long the waiter has waited on the old leader.
func (m *Machine) Waiters() []*WaiterRef {
	var out []*WaiterRef
	m.lockTree.Ascend(func(l *lockState) bool {
		for _, w := range l.waiters() {
			if w.timeout > 0 {
				out = append(out, &WaiterRef{
					Lock:         l.name,
					SessionID:    w.s.id,
					AcquireSeq:   w.acquireSeq,
					TimeoutNanos: w.timeout,
				})
			}
		}
		return true
	})
	return out
}

// SessionRef is what the leader needs to keep a session's deadline.
type SessionRef struct {
	ID          uint64
	TTLNanos    int64
	Blacklisted bool
	// SecretHash is what a keepalive or renewal for it must show.
	SecretHash SecretHash
}

// SessionIDs returns every live session in ascending id order. A new leader
// uses it to give each a full TTL from its election (DESIGN.md §2).
func (m *Machine) SessionIDs() []*SessionRef {
	out := make([]*SessionRef, 0, len(m.sessions))
	m.sessionTree.Ascend(func(s *sessionState) bool {
		out = append(out, &SessionRef{ID: s.sess.id, TTLNanos: s.sess.ttl, Blacklisted: s.blacklisted, SecretHash: s.sess.secretHash})
		return true
	})
	return out
}

// NumSessions returns the number of live sessions.
func (m *Machine) NumSessions() int { return len(m.sessions) }

// NumSessionsOf returns the number of live sessions that principal
// opened, in constant time; 0 for "" (sessions opened while
// authentication was off are no user's).
func (m *Machine) NumSessionsOf(principal string) int {
	if principal == "" {
		return 0
	}
	return m.byPrincipal[principal]
}

// RetriedOpen returns the live session that the open cmd, applied now,
// would answer as a retry of the open that made it (the same nonce,
// owner, TTL, secret and user), and whether there is one: then cmd opens
// no new session.
func (m *Machine) RetriedOpen(cmd *fsmpb.Command) (uint64, bool) {
	if s := m.retriedOpen(cmd.GetOpenSession(), cmd.GetPrincipal()); s != nil {
		return s.id, true
	}
	return 0, false
}

// HasResult reports whether session id keeps the result of its request
// seq: a command of that session and seq, applied now, would be answered
// from the session's exactly-once cache and add nothing (a retry).
func (m *Machine) HasResult(id, seq uint64) bool {
	s := m.sessions[id]
	return s != nil && seq != 0 && s.cachedEntry(seq) != nil
}

// NumLocks returns the number of locks that have a holder or a waiter.
func (m *Machine) NumLocks() int { return len(m.locks) }

// HoldRef names one hold of a session, and its pending revocation if a
// RevokeHold asked it to end (RevokeGraceNanos 0: none).
type HoldRef struct {
	Lock     string
	OwnerKey string
	Token    uint64

	RevokeGraceNanos       int64
	RevokeDeadlineUnixNano int64
}

// HoldsOf returns the holds of session id (none if it does not exist), in
// no particular order.
func (m *Machine) HoldsOf(id uint64) []HoldRef {
	s := m.sessions[id]
	if s == nil {
		return nil
	}
	out := make([]HoldRef, 0, len(s.held))
	for i, l := range s.held {
		for k := range l.holders {
			if h := &l.holders[k]; h.s == s && h.idx == int32(i) {
				ref := HoldRef{Lock: l.name, OwnerKey: h.ownerKey, Token: h.token}
				if r := l.revocationOf(h); r != nil {
					ref.RevokeGraceNanos, ref.RevokeDeadlineUnixNano = r.grace, r.until
				}
				out = append(out, ref)
				break
			}
		}
	}
	return out
}

// LimitedHold names a hold that has a hold limit.
type LimitedHold struct {
	Lock       string
	SessionID  uint64
	OwnerKey   string
	Token      uint64
	LimitNanos int64
}

// LimitedHolds returns every hold with a hold limit, by lock name. A new
// leader uses it to arm the timers that end those holds with ExpireHold;
// it gives each its full limit, since it cannot know when the old leader
// last renewed it.
func (m *Machine) LimitedHolds() []LimitedHold {
	var out []LimitedHold
	m.lockTree.Ascend(func(l *lockState) bool {
		for i := range l.holders {
			if h := &l.holders[i]; h.holdLimit != 0 {
				out = append(out, LimitedHold{Lock: l.name, SessionID: h.s.id, OwnerKey: h.ownerKey, Token: h.token, LimitNanos: int64(msDuration(h.holdLimit))})
			}
		}
		return true
	})
	return out
}

// WouldQueue reports whether an acquire of name by session, applied now,
// would queue behind others: the lock has waiters, and session holds none
// of it (a re-entry is granted at once).
func (m *Machine) WouldQueue(name string, session uint64) bool {
	l := m.locks[name]
	if l == nil || l.queue == nil || len(l.queue.waiters) == 0 {
		return false
	}
	for _, h := range l.holders {
		if h.s.id == session {
			return false
		}
	}
	return true
}
