package fsm

import (
	"strconv"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Cancelling a wait: a CancelWait ends a queued acquire at its waiter's
// request (its context ended, its wait timed out, or its caller went away:
// abandoned), and, when the grant won the race with an abandoned cancel,
// gives back the hold the acquire got.

// cancelWait ends the queued acquire (session id, acquire seq) of a lock
// and grants the lock on to the waiters behind it; or refuses: a request
// that names no waiter, or NOT_WAITING when the acquire is not queued (its
// answer names the hold if the grant won the race).
func (m *Machine) cancelWait(a *apply, s *session, op *fsmpb.CancelWait) {
	name := op.GetLock()
	if err := checkLockName(name); err != nil {
		a.refuse(err)
		return
	}
	switch {
	case op.GetSessionId() == 0:
		a.refuse(invalid("cancel_wait of lock %s needs the waiter's session id", quote(name)))
		return
	case op.GetAcquireSeq() == 0:
		a.refuse(invalid("cancel_wait of lock %s needs the waiter's acquire seq", quote(name)))
		return
	case s != nil && s.id != op.GetSessionId():
		a.refuse(invalid("session %d cannot cancel a wait of session %d", s.id, op.GetSessionId()))
		return
	case op.GetTimedOut() && op.GetAbandoned():
		a.refuse(invalid("cancel_wait of lock %s is marked both timed out and abandoned", quote(name)))
		return
	}
	ws := m.sessions[op.GetSessionId()]
	if ws == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", op.GetSessionId()))
		return
	}
	key := waitKey{name, op.GetAcquireSeq()}
	if op.GetAbandoned() {
		if c := ws.cachedEntry(key.seq); c != nil && c.claimed {
			a.refuse(errorf(fsmpb.Error_ERROR_NOT_WAITING,
				"a retry of acquire seq %d of session %d (or its own cancel) has claimed the request; its abandoned cancel has no effect",
				key.seq, ws.id))
			if h := m.heldThrough(name, ws.id, key.seq); h != nil {
				a.res.Acquire = grantedOutcome(name, h)
			}
			return
		}
	}
	if _, ok := ws.waits[key]; !ok {
		if op.GetAbandoned() && m.releaseAbandoned(a, ws, name, key.seq) {
			return
		}
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_WAITING,
			"session %d has no waiter with acquire seq %d on lock %s", ws.id, key.seq, quote(name)))
		if h := m.heldThrough(name, ws.id, key.seq); h != nil {
			a.res.Message = "session " + strconv.FormatUint(ws.id, 10) + " already holds lock " +
				quote(name) + " through acquire seq " + strconv.FormatUint(key.seq, 10)
			a.res.Acquire = grantedOutcome(name, h)
			if c := ws.cachedEntry(key.seq); s != nil && c != nil && !c.claimed {
				// The session learns the grant from this answer and may
				// act on it, as from a retry.
				m.claim(ws, key.seq)
			}
		}
		return
	}
	code := fsmpb.Error_ERROR_WAIT_CANCELLED
	if op.GetTimedOut() {
		code = fsmpb.Error_ERROR_WAIT_TIMED_OUT
	}
	l := m.locks[name]
	m.changeLock(l)
	ownerKey := l.waiters()[l.waiterIndex(ws, key.seq)].ownerKey
	l.removeWaiter(ws, key.seq)
	ws.dropWait(key)
	m.changeSession(ws)
	ws.waitEnded(key.seq, name, code)
	m.mayStall(a, ws, ownerKey)
	a.res.WaitsEnded = append(a.res.WaitsEnded, &fsmpb.WaitEnded{
		SessionId:  ws.id,
		AcquireSeq: key.seq,
		Lock:       name,
		Error:      code,
	})
	m.grantWaiters(a, l)
}

// heldThrough returns the holder record of lock name that session got
// through its acquire seq, or nil.
func (m *Machine) heldThrough(name string, sessionID, seq uint64) *holder {
	l := m.locks[name]
	if l == nil {
		return nil
	}
	for i := range l.holders {
		if h := &l.holders[i]; h.s.id == sessionID && h.acquireSeq == seq {
			return h
		}
	}
	return nil
}

// releaseAbandoned is the second half of an abandoned CancelWait: the
// acquire (ws, seq) of lock name is no longer queued, and if the grant won
// the race with the cancel, the hold it got loses one count, ending at zero
// (the lock goes to the next waiter with this entry's index as token, as on
// Release), and the acquire's cached result says its caller went away. It
// reports whether it decided the entry's result (a release, or a refusal
// naming the hold); false leaves the plain NOT_WAITING refusal to the
// caller.
//
// Only a hold whose acquire's answer is still cached, unclaimed, is
// released: once the result is forgotten (seq below min_unacked) nothing
// tells whether a retry taught the client it holds the lock.
func (m *Machine) releaseAbandoned(a *apply, ws *session, name string, seq uint64) bool {
	h := m.heldThrough(name, ws.id, seq)
	if h == nil {
		return false
	}
	l := m.locks[name]
	r := ws.cachedEntry(seq)
	switch {
	case r == nil:
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_WAITING,
			"session %d holds lock %s through acquire seq %d, whose answer is no longer cached: the client may have learnt the grant, so the hold stays",
			ws.id, quote(name), seq))
		a.res.Acquire = grantedOutcome(name, h)
		return true
	case !r.acquireIs(name, fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED):
		// Not a waiting Acquire's grant (AcquireMany), or one whose hold
		// an earlier abandoned cancel already took a count from.
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_WAITING,
			"session %d holds lock %s through seq %d, whose cached answer is not an acquire's grant of it (a cleanup took its count already, or it was an acquire_many); the hold stays",
			ws.id, quote(name), seq))
		a.res.Acquire = grantedOutcome(name, h)
		return true
	}
	a.res.Acquire = grantedOutcome(name, h)
	h = m.changeHolder(l, h)
	h.count--
	a.res.RemainingCount = h.count
	if h.count == 0 {
		m.endOwnHold(a, l, h, EndAbandoned)
	}
	m.changeSession(ws)
	ws.abandoned(seq, name)
	return true
}
