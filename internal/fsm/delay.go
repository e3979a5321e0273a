package fsm

import (
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Lock-delay (Chubby's, Consul's LockDelay): a hold may carry a delay,
// stated by its acquire (the server fills in its default). When the hold
// ends by its session's expiry (a blacklisted session's too) or by its
// hold limit, its holder may still be writing, and a resource that cannot
// check fencing tokens cannot tell its late writes from the next
// holder's. So the lock is granted to no one for the delay: its waiters
// stay queued in order, an acquire that would not wait is answered BUSY
// with the delay's end, and an acquire that waits joins the queue. A
// release, a close, a CasRelease (an operator's decision to free the lock
// now) or an abandoned acquire starts none: the holder said it is done,
// or the operator did.
//
// Time enters as everywhere else (DESIGN.md §2): the entry that ends the
// hold starts the delay and reports it (liveness.lock_delays_started);
// the leader's liveness tracker times it on its monotonic clock and
// proposes EndLockDelay naming the entry that started it; a new leader
// times every running delay afresh, in full, from its promotion. The
// state machine keeps the delay's length, the entry that started it and,
// for people, that entry's wall clock plus the length.

// lockDelay is the lock-delay a lock is in, kept in its queue record:
// lockState has no room for it (TestRecordSizes), and the queue is what
// a delay holds back.
type lockDelay struct {
	from  uint64 // the entry that started it; 0: the lock is in none
	nanos int64  // its length
	until int64  // from's wall clock plus nanos, display only
}

// delay returns the lock-delay l is in (from 0 if none).
func (l *lockState) delay() lockDelay {
	if l.queue == nil {
		return lockDelay{}
	}
	return l.queue.delay
}

// delayed reports whether l is in a lock-delay: granted to no one.
func (l *lockState) delayed() bool { return l.queue != nil && l.queue.delay.from != 0 }

// grantsAtOnce reports whether a new acquire of l, shared or not, would
// be granted now: its hold fits beside the holders, no one waits ahead
// of it, and no lock-delay runs.
func (l *lock) grantsAtOnce(shared bool) bool {
	return l.admits(shared) && len(l.waiters()) == 0 && !l.delayed()
}

// delays reports whether a hold that ends this way starts its
// lock-delay: it ended without its holder saying it is done (a revoked
// hold's holder was asked, and may still be writing).
func (e HoldEnd) delays() bool {
	return e == EndSessionExpired || e == EndHoldExpired || e == EndRevoked
}

// checkLockDelay returns an acquire's lock-delay in whole seconds (0:
// none), or why it cannot be one.
func checkLockDelay(d int64) (uint8, *Error) {
	if err := refusal(rules.CheckLockDelayNanos(d)); err != nil {
		return 0, err
	}
	return uint8(nanos(d) / second), nil
}

// secDuration is a lock-delay kept in seconds, in nanos.
func secDuration(s uint8) nanos { return nanos(s) * second }

// startDelay puts l, whose hold with a lock-delay of secs seconds this
// entry ended, in its lock-delay from this entry. A lock already in one
// restarts it from this entry, for the longer of the two lengths, so
// the delay never ends before either would have.
func (m *Machine) startDelay(a *apply, l *lock, secs uint8) {
	m.changeLock(l)
	if l.queue == nil {
		l.queue = &queue{}
	}
	d := int64(secDuration(secs))
	if old := l.queue.delay; old.from != 0 {
		d = max(d, old.nanos)
	}
	l.queue.delay = lockDelay{from: a.index, nanos: d, until: a.wall + d}
	lv := a.liveness()
	lv.LockDelaysStarted = append(lv.LockDelaysStarted, &fsmpb.LockDelay{Lock: l.name, DelayFrom: a.index, DelayNanos: d})
}

// endLockDelay applies the leader's EndLockDelay: the delay it names
// ends, and l goes to its waiters (or, with none, is deleted).
func (m *Machine) endLockDelay(a *apply, s *session, op *fsmpb.EndLockDelay) {
	name := op.GetLock()
	if !a.leaderCommand(s, "end_lock_delay", name) {
		return
	}
	if op.GetDelayFrom() == 0 {
		a.refuse(invalid("end_lock_delay of lock %s needs the entry that started the delay", quote(name)))
		return
	}
	l := m.locks[name]
	if l == nil || l.delay().from != op.GetDelayFrom() {
		a.refuse(errorf(fsmpb.Error_ERROR_LOCK_NOT_FOUND,
			"lock %s has no lock-delay started by entry %d (it ended, or a later expiry restarted it)", quote(name), op.GetDelayFrom()))
		return
	}
	m.changeLock(l)
	d := l.queue.delay
	a.liveness().LockDelayEnded = &fsmpb.LockDelay{Lock: name, DelayFrom: d.from, DelayNanos: d.nanos}
	l.queue.delay = lockDelay{}
	m.grantWaiters(a, l)
}

// delayedOutcome marks o, a BUSY or QUEUED answer about l, with the end
// of l's lock-delay, if it is in one.
func (l *lockState) delayedOutcome(o *fsmpb.AcquireOutcome) {
	if d := l.delay(); d.from != 0 {
		o.DelayedUntilUnixNano = d.until
	}
}

// LockDelayRef names a running lock-delay.
type LockDelayRef struct {
	Lock       string
	DelayFrom  uint64
	DelayNanos int64
}

// LockDelays returns every running lock-delay, by lock name. A new leader
// uses it to arm the timers that end them with EndLockDelay; it gives
// each its full length, since it cannot know how long the delay has run
// on the old leader.
func (m *Machine) LockDelays() []LockDelayRef {
	var out []LockDelayRef
	m.lockTree.Ascend(func(l *lockState) bool {
		if d := l.delay(); d.from != 0 {
			out = append(out, LockDelayRef{Lock: l.name, DelayFrom: d.from, DelayNanos: d.nanos})
		}
		return true
	})
	return out
}

// checkDelay returns why a snapshot's lock p cannot be in the lock-delay
// it states, or nil.
func checkDelay(p *fsmpb.Lock, applied uint64) *Error {
	from, d, until := p.GetDelayFrom(), p.GetDelayNanos(), p.GetDelayedUntilUnixNano()
	if from == 0 {
		if d != 0 || until != 0 {
			return invalid("a lock-delay of %v with no entry that started it", nanos(d))
		}
		return nil
	}
	if from > applied {
		return invalid("a lock-delay started by entry %d, after applied index %d", from, applied)
	}
	if _, err := checkLockDelay(d); err != nil || d == 0 {
		return invalid("a lock-delay of %v: want 1s..%v in whole seconds", nanos(d), rules.MaxLockDelay)
	}
	return nil
}
