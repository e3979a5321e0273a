package fsm

import (
	"math"
	"slices"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// acquireMany applies an AcquireMany: each lock tried on its own, for one
// owner key, or with all, every lock or none in this one entry; each lock
// in the set's one mode, or in its own (modes: a mixed set).
func (m *Machine) acquireMany(a *apply, s *session, op *fsmpb.AcquireMany) {
	if !a.needSession(s, "acquire_many") {
		return
	}
	names := op.GetLocks()
	if err := refusal(rules.CheckLockNames(names)); err != nil {
		a.refuse(err)
		return
	}
	if err := checkOwnerKey(op.GetOwnerKey()); err != nil {
		a.refuse(err)
		return
	}
	modes, err := setModes(op)
	if err != nil {
		a.refuse(err)
		return
	}
	holdLimit, err := checkHoldLimit(op.GetHoldLimitNanos())
	if err != nil {
		a.refuse(err)
		return
	}
	lockDelay, err := checkLockDelay(op.GetLockDelayNanos())
	if err != nil {
		a.refuse(err)
		return
	}
	if s.blacklisted {
		a.refuse(errorf(fsmpb.Error_ERROR_BLACKLISTED, "session %d is blacklisted", s.id))
		return
	}
	fresh, busy := 0, 0 // locks that would be newly held; that cannot be
	for i, name := range names {
		shared, limit := modes.of(i)
		var h *holder
		if l := m.locks[name]; l != nil {
			h = l.holderOf(s, op.GetOwnerKey())
			if err := l.fits(h, limit, shared); err != nil {
				a.refuse(err)
				return
			}
			if h != nil && h.holdLimit != holdLimit {
				a.refuse(errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
					"session %d key %s holds lock %s with a hold limit of %v; a reentrant acquire_many must state it, not %v",
					s.id, quote(h.ownerKey), quote(name), msDuration(h.holdLimit), msDuration(holdLimit)))
				return
			}
			if h != nil && h.lockDelay != lockDelay {
				a.refuse(errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
					"session %d key %s holds lock %s with a lock-delay of %v; a reentrant acquire_many must state it, not %v",
					s.id, quote(h.ownerKey), quote(name), secDuration(h.lockDelay), secDuration(lockDelay)))
				return
			}
			if h == nil && !l.grantsAtOnce(shared) {
				busy++
			}
		}
		if h == nil {
			fresh++
		} else if h.count == math.MaxUint32 {
			a.refuse(errorf(fsmpb.Error_ERROR_TOO_MANY_HOLDS,
				"reentrant count of lock %s is at its limit %d", quote(name), uint32(math.MaxUint32)))
			return
		}
	}
	if s.load()+fresh > MaxHoldsPerSession {
		a.refuse(errorf(fsmpb.Error_ERROR_TOO_MANY_HOLDS,
			"session %d holds or waits for %d locks and asks for %d more; the limit is %d",
			s.id, s.load(), fresh, MaxHoldsPerSession))
		return
	}

	out := make([]*fsmpb.AcquireOutcome, 0, len(names))
	if busy > 0 && op.GetAll() {
		// All or nothing, and not all: nothing changes.
		for i, name := range names {
			shared, _ := modes.of(i)
			l := m.locks[name]
			if l == nil || l.holderOf(s, op.GetOwnerKey()) != nil || l.grantsAtOnce(shared) {
				out = append(out, &fsmpb.AcquireOutcome{Lock: name, Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_SKIPPED})
				continue
			}
			out = append(out, l.busyOutcome())
		}
		a.res.AcquireMany = out
		return
	}
	m.changeSession(s)
	s.held = slices.Grow(s.held, fresh) // once, not doubling on the way
	for i, name := range names {
		shared, limit := modes.of(i)
		l := m.locks[name]
		switch {
		case l != nil && l.holderOf(s, op.GetOwnerKey()) != nil:
			h := m.changeHolder(l, l.holderOf(s, op.GetOwnerKey()))
			h.count++
			out = append(out, grantedOutcome(name, h))
		case l == nil || l.grantsAtOnce(shared):
			h := m.hold(a, m.lockFor(name), s, op.GetOwnerKey(), a.seq, limit, shared, holdLimit, lockDelay)
			out = append(out, grantedOutcome(name, h))
		default:
			out = append(out, l.busyOutcome())
		}
	}
	a.res.AcquireMany = out
}

// lockModes is how an AcquireMany takes its locks: all in one mode
// (shared, limit), or each in its own (each).
type lockModes struct {
	shared bool
	limit  uint32
	each   []*fsmpb.LockMode
}

// of is the shared and limit (at least 1) of the set's i-th lock.
func (lm lockModes) of(i int) (shared bool, limit uint32) {
	if lm.each == nil {
		return lm.shared, lm.limit
	}
	return lm.each[i].GetShared(), max(lm.each[i].GetLimit(), 1)
}

// setModes checks op's modes: a mode per lock, with the set's own shared
// and limit unset, or none and the set's limit.
func setModes(op *fsmpb.AcquireMany) (lockModes, *Error) {
	each := op.GetModes()
	if err := refusal(rules.CheckSetModes(len(op.GetLocks()), len(each), op.GetShared(), op.GetLimit())); err != nil {
		return lockModes{}, err
	}
	if len(each) > 0 {
		for i, md := range each {
			if _, err := checkLimit(md.GetLimit()); err != nil {
				return lockModes{}, errorf(err.Code, "mode of lock %s: %s", quote(op.GetLocks()[i]), err.Msg)
			}
		}
		return lockModes{each: each}, nil
	}
	limit, err := checkLimit(op.GetLimit())
	return lockModes{shared: op.GetShared(), limit: limit}, err
}

// busyOutcome is an AcquireMany's BUSY answer about l: its holder, and
// the end of its lock-delay if it is in one.
func (l *lock) busyOutcome() *fsmpb.AcquireOutcome {
	o := &fsmpb.AcquireOutcome{Lock: l.name, Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY, Holder: l.currentHolder()}
	l.delayedOutcome(o)
	return o
}
