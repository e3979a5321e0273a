package fsm

// Hold values: a hold may carry a small value, set by the acquire that
// made it (a queued acquire's waiter keeps it for its grant) and changed
// by its holder with Proclaim: what an election's leader publishes (its
// address, its id). Elections are a lock's holder and its value; nothing
// else of the lock changes.
//
// Few locks have values, and the holder and waiter records are pinned to
// their allocation size classes (TestRecordSizes), so the values live
// beside the queue, in the lock's record of rarer things, keyed by the
// acquire that made the hold or the waiter: (session, owner key, acquire
// seq). A waiter granted becomes a holder under the same key, so its value
// carries over with no step of its own; a hold or waiter that leaves its
// lock drops its value (removeHolder, removeWaiter, a session's end).

import (
	"fmt"
	"slices"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// HoldValueVersion is the log version that added hold values
// (Acquire.value, Proclaim, Holder.value and Waiter.value in snapshots):
// the leader writes none below it.
const HoldValueVersion = 9

// holdValue is the value of the hold or waiter that the acquire (s,
// ownerKey, seq) made.
type holdValue struct {
	s        *session
	ownerKey string
	seq      uint64
	value    string
}

// valueOf returns the value of the hold or waiter made by the acquire (s,
// ownerKey, seq), "" if none.
func (l *lockState) valueOf(s *session, ownerKey string, seq uint64) string {
	if l.queue == nil {
		return ""
	}
	for i := range l.queue.values {
		if v := &l.queue.values[i]; v.s == s && v.seq == seq && v.ownerKey == ownerKey {
			return v.value
		}
	}
	return ""
}

// holderValue is h's value.
func (l *lockState) holderValue(h *holder) string { return l.valueOf(h.s, h.ownerKey, h.acquireSeq) }

// waiterValue is w's value.
func (l *lockState) waiterValue(w *waiter) string { return l.valueOf(w.s, w.ownerKey, w.acquireSeq) }

// holderProto describes h, a holder of l, with its value.
func (l *lockState) holderProto(h *holder) *fsmpb.Holder {
	p := h.toProto(nil)
	p.Value = l.holderValue(h)
	return p
}

// setValue sets the value of the hold or waiter made by the acquire (s,
// ownerKey, seq); "" drops it. l has been through changeLock.
func (l *lock) setValue(s *session, ownerKey string, seq uint64, value string) {
	if l.queue == nil {
		if value == "" {
			return
		}
		l.queue = &queue{}
	}
	for i := range l.queue.values {
		if v := &l.queue.values[i]; v.s == s && v.seq == seq && v.ownerKey == ownerKey {
			if value == "" {
				l.queue.values = slices.Delete(l.queue.values, i, i+1)
			} else {
				v.value = value
			}
			return
		}
	}
	if value != "" {
		l.queue.values = append(l.queue.values, holdValue{s: s, ownerKey: ownerKey, seq: seq, value: value})
	}
}

// dropValue drops the value of the hold or waiter made by the acquire (s,
// ownerKey, seq), which leaves l. l has been through changeLock.
func (l *lock) dropValue(s *session, ownerKey string, seq uint64) {
	if l.queue != nil && len(l.queue.values) > 0 {
		l.setValue(s, ownerKey, seq, "")
	}
}

// dropValuesOf drops every value of s's holds and waiters of l (s ended).
// l has been through changeLock.
func (l *lock) dropValuesOf(s *session) {
	if l.queue != nil && len(l.queue.values) > 0 {
		l.queue.values = slices.DeleteFunc(l.queue.values, func(v holdValue) bool { return v.s == s })
	}
}

// restoreValue gives the hold or waiter of a snapshot made by the acquire
// (s, ownerKey, seq) its value, or says why it cannot have it.
func (l *lock) restoreValue(s *session, ownerKey string, seq uint64, value string) error {
	if value == "" {
		return nil
	}
	if err := rules.CheckHoldValue(value); err != nil {
		return fmt.Errorf("lock %q: session %d key %q: %w", l.name, s.id, ownerKey, err)
	}
	if l.valueOf(s, ownerKey, seq) != "" {
		return fmt.Errorf("lock %q: two records of session %d key %q acquire seq %d have values", l.name, s.id, ownerKey, seq)
	}
	l.setValue(s, ownerKey, seq, value)
	return nil
}

// acquireWithValue applies an Acquire: the value is checked first (a bad
// one changes nothing), then the acquire as ever, and then the hold it
// made or the waiter it queued gets the value. A reentrant acquire, or
// an answer that made neither, leaves every value as it was.
func (m *Machine) acquireWithValue(a *apply, s *session, op *fsmpb.Acquire) {
	value := op.GetValue()
	if value != "" {
		if err := refusal(rules.CheckHoldValue(value)); err != nil {
			a.refuse(err)
			return
		}
	}
	m.acquire(a, s, op)
	if value == "" || a.res.GetError() != fsmpb.Error_ERROR_NONE {
		return
	}
	o := a.res.GetAcquire()
	switch o.GetStatus() {
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		if o.GetToken() != a.index {
			return // a re-entry of an earlier hold
		}
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
	default:
		return
	}
	l := m.locks[op.GetLock()]
	m.changeLock(l)
	l.setValue(s, op.GetOwnerKey(), a.seq, value)
}

// proclaim applies a Proclaim: the requesting session's hold of the lock
// under the owner key, named by its token, gets the value.
func (m *Machine) proclaim(a *apply, s *session, op *fsmpb.Proclaim) {
	if !a.needSession(s, "proclaim") {
		return
	}
	name := op.GetLock()
	if err := checkLockName(name); err != nil {
		a.refuse(err)
		return
	}
	if err := checkOwnerKey(op.GetOwnerKey()); err != nil {
		a.refuse(err)
		return
	}
	if err := refusal(rules.CheckHoldValue(op.GetValue())); err != nil {
		a.refuse(err)
		return
	}
	l := m.locks[name]
	if l == nil || len(l.holders) == 0 {
		a.refuse(errorf(fsmpb.Error_ERROR_LOCK_NOT_FOUND, "proclaim: lock %s is not held", quote(name)))
		return
	}
	h := l.holderOf(s, op.GetOwnerKey())
	if h == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_HOLDER,
			"proclaim: session %d key %s does not hold lock %s", s.id, quote(op.GetOwnerKey()), quote(name)))
		return
	}
	if h.token != op.GetToken() {
		a.refuse(errorf(fsmpb.Error_ERROR_TOKEN_MISMATCH,
			"proclaim: session %d key %s holds lock %s with token %d, not %d", s.id, quote(op.GetOwnerKey()), quote(name), h.token, op.GetToken()))
		return
	}
	m.changeLock(l)
	h = l.holderOf(s, op.GetOwnerKey())
	l.setValue(s, h.ownerKey, h.acquireSeq, op.GetValue())
}
