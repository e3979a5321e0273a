package fsm

import (
	"math"
	"slices"
	"strconv"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// lock is one lock: its holders and its FIFO queue. A lock exists while it
// has a holder or a waiter; the last one leaving deletes it.
//
// A lock admits up to limit holders (1 for a mutex, N for a semaphore of N
// permits, many readers of a read/write lock). A hold is exclusive (a
// mutex's, a writer's) and sits alone, or shared (a permit, a reader) and
// sits beside other shared holds up to the limit. The limit is the lock's
// from its first holder or waiter until it is deleted, and every holder and
// waiter record keeps a copy of it: the lock record stays within its size
// class (a million of them is the design point; see TestRecordSizes), and
// a holder record has room for it within its 64 bytes.
//
// Holders and waiters are plain Go records, not fsmpb messages: a million
// held locks is the design point, and a message costs twice the bytes (its
// bookkeeping, and an owner label that is always its session's). The
// messages are built only at the edges: results, reads, snapshots.
//
// A lock is a handle on its current lockState. Apply changes the state in
// place unless a frozen state shares it; then its first change copies it
// (changeLock, in frozen.go). Sessions, the index by name and Apply hold
// the handle, so a copy moves nothing else.
type lock struct {
	*lockState
	// epoch is the Machine's freeze epoch when lockState was made.
	epoch uint64
}

// newLock returns a lock named name, with no holder and no waiter.
func newLock(name string) *lock { return &lock{lockState: &lockState{name: name}} }

// lockState is a lock's name, holders and queue, as the Machine or a
// frozen state sees them: once a frozen state shares it, it never
// changes.
type lockState struct {
	name    string
	holders []holder // at most limit(); one if it is exclusive
	// queue is nil until the first waiter comes or a lock-delay starts,
	// and then kept (for the next one) until the lock is deleted. Most
	// locks never have either: a pointer here takes 8 bytes, a slice
	// header 24.
	queue *queue
	// one is where holders keeps its only holder (see useOne): most
	// locks have one, so a lock's state and its holder are one 112-byte
	// allocation, not a 48-byte and a 64-byte one.
	one [1]holder
}

// useOne points an empty holders at l.one, unless it already has room.
func (l *lock) useOne() {
	if cap(l.holders) == 0 {
		l.holders = l.one[:0]
	}
}

// leftOne clears l.one once holders has moved to an array of its own (a
// second holder came), so that it keeps no session alive.
func (l *lock) leftOne() {
	if len(l.holders) > 0 && &l.holders[0] != &l.one[0] {
		l.one[0] = holder{}
	}
}

// queue is the FIFO of a lock's waiters: the head is granted first;
// the lock-delay that holds them back, if one runs (delay.go); and its
// holds' pending revocations (revoke.go).
type queue struct {
	waiters []waiter
	delay   lockDelay
	revokes []revocation
	values  []holdValue // of holds and waiters (value.go)
}

// holder is one hold of a lock (fsmpb.Holder without the owner label, which
// is s.owner).
type holder struct {
	s          *session
	ownerKey   string
	token      uint64 // the index of the entry that granted the hold
	since      int64  // that entry's wall clock, display only
	acquireSeq uint64
	count      uint32 // reentrant count, >= 1
	idx        int32  // where this hold is in s.held
	limit      uint16 // the lock's holder limit, >= 1 (rules.MaxHoldersPerLock fits)
	shared     bool
	lockDelay  uint8  // seconds (rules.MaxLockDelay fits); 0: none
	holdLimit  uint32 // milliseconds; 0: the hold has no limit
}

// waiter is one queued acquire (fsmpb.Waiter without the owner label, which
// is s.owner).
type waiter struct {
	s          *session
	ownerKey   string
	acquireSeq uint64
	timeout    int64 // wait_timeout_nanos; 0 waits until cancelled
	since      int64 // wall clock of the entry that queued it, display only
	limit      uint16
	shared     bool
	lockDelay  uint8  // seconds, for the hold it will get
	holdLimit  uint32 // milliseconds, for the hold it will get
}

// limit returns the number of holders l admits: its first holder's or
// waiter's copy (a lock has one or the other, or it is deleted).
func (l *lockState) limit() uint32 {
	if len(l.holders) > 0 {
		return uint32(l.holders[0].limit)
	}
	if ws := l.waiters(); len(ws) > 0 {
		return uint32(ws[0].limit)
	}
	return 1
}

// admits reports whether a new hold, shared or not, fits beside l's
// holders (the queue aside): an exclusive hold needs l free, a shared one
// no exclusive holder and fewer holders than the limit.
func (l *lock) admits(shared bool) bool {
	if len(l.holders) == 0 {
		return true
	}
	// Holders are all shared, or one exclusive.
	return shared && l.holders[0].shared && len(l.holders) < int(l.holders[0].limit)
}

// grantable reports whether the queued w may be granted now, if it is at
// the head of the queue: its hold fits, and its session and owner key do
// not hold l already. (A second waiting acquire by one session and key
// waits for the first one's hold to end, whatever the lock's kind, so a
// session and key never has two holds of one lock.)
func (l *lock) grantable(w *waiter) bool {
	if !l.admits(w.shared) {
		return false
	}
	// The shorter of the two lists first: a release that lets in a run of
	// readers checks each against a lock with up to rules.MaxHoldersPerLock
	// holders, and their sessions hold few locks.
	if len(w.s.held) < len(l.holders) && !slices.Contains(w.s.held, l) {
		return true
	}
	return l.holderOf(w.s, w.ownerKey) == nil
}

// mode names a hold's mode for messages.
func mode(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

// holderOf returns the holder record of (s, ownerKey), or nil. The pointer
// is valid until l.holders next changes.
func (l *lock) holderOf(s *session, ownerKey string) *holder {
	for i := range l.holders {
		if h := &l.holders[i]; h.s == s && h.ownerKey == ownerKey {
			return h
		}
	}
	return nil
}

// removeHolder removes the record h points to from l.holders.
func (l *lock) removeHolder(h *holder) {
	for i := range l.holders {
		if &l.holders[i] == h {
			l.dropValue(h.s, h.ownerKey, h.acquireSeq)
			l.holders = slices.Delete(l.holders, i, i+1)
			return
		}
	}
	panic("fsm: holder of session " + strconv.FormatUint(h.s.id, 10) + " is not one of lock " + quote(l.name))
}

// waiters returns the queue, head first.
func (l *lockState) waiters() []waiter {
	if l.queue == nil {
		return nil
	}
	return l.queue.waiters
}

// enqueue adds w at the tail of the queue.
func (l *lock) enqueue(w waiter) {
	if l.queue == nil {
		l.queue = &queue{}
	}
	l.queue.waiters = append(l.queue.waiters, w)
}

// waiterIndex returns the queue position (0-based) of the waiter (s, seq),
// or -1.
func (l *lock) waiterIndex(s *session, seq uint64) int {
	ws := l.waiters()
	for i := range ws {
		if w := &ws[i]; w.s == s && w.acquireSeq == seq {
			return i
		}
	}
	return -1
}

func (l *lock) removeWaiter(s *session, seq uint64) {
	if i := l.waiterIndex(s, seq); i >= 0 {
		l.dropValue(s, l.queue.waiters[i].ownerKey, seq)
		l.queue.waiters = slices.Delete(l.queue.waiters, i, i+1)
	}
}

// removeWaiters is removeWaiter for each of seqs (ascending) in turn, in
// one pass over the queue: a session that ends with n waits in a queue
// of a few thousand would otherwise scan and shift it n times.
func (l *lock) removeWaiters(s *session, seqs []uint64) {
	if len(seqs) == 1 || l.queue == nil {
		for _, seq := range seqs {
			l.removeWaiter(s, seq)
		}
		return
	}
	keys := make([]string, len(seqs))
	found := make([]bool, len(seqs))
	l.queue.waiters = slices.DeleteFunc(l.queue.waiters, func(w waiter) bool {
		if w.s != s {
			return false
		}
		i, ok := slices.BinarySearch(seqs, w.acquireSeq)
		if !ok || found[i] {
			return false // removeWaiter removes the first of (s, seq) only
		}
		found[i], keys[i] = true, w.ownerKey
		return true
	})
	for i, seq := range seqs {
		if found[i] {
			l.dropValue(s, keys[i], seq)
		}
	}
}

// popWaiter removes and returns the head of the queue, which is not empty.
// It moves the slice past the head instead of shifting the queue (a grant
// stays O(1) however long the queue); the vacated slot is cleared so it
// keeps nothing alive. The last waiter leaving rewinds to the array's
// start for the next one.
func (l *lock) popWaiter() waiter {
	q := l.queue
	w := q.waiters[0]
	q.waiters[0] = waiter{}
	if len(q.waiters) == 1 {
		q.waiters = q.waiters[:0]
	} else {
		q.waiters = q.waiters[1:]
	}
	return w
}

// currentHolder is the holder reported to a BUSY or QUEUED acquire.
func (l *lock) currentHolder() *fsmpb.Holder {
	if len(l.holders) == 0 {
		return nil
	}
	return l.holderProto(&l.holders[0]) // without its revocation: for the acquirer
}

// lockFor returns the lock name, creating it if needed.
func (m *Machine) lockFor(name string) *lock {
	l := m.locks[name]
	if l == nil {
		l = newLock(name)
		m.created(l)
		m.locks[name] = l
		m.lockTree.ReplaceOrInsert(l.lockState)
	}
	return l
}

// hold makes s (owner key, acquire seq) a holder of l, granted by this
// entry: its token is the entry's index. A hold with a hold limit is
// reported in liveness.limited_holds_granted. The pointer is valid until
// l.holders next changes.
func (m *Machine) hold(a *apply, l *lock, s *session, ownerKey string, acquireSeq uint64, limit uint32, shared bool, holdLimit uint32, lockDelay uint8) *holder {
	m.changeLock(l)
	m.changeSession(s)
	l.useOne()
	l.holders = append(l.holders, holder{
		s:          s,
		ownerKey:   ownerKey,
		token:      a.index,
		since:      a.wall,
		acquireSeq: acquireSeq,
		count:      1,
		idx:        s.addHold(l),
		limit:      uint16(limit),
		shared:     shared,
		lockDelay:  lockDelay,
		holdLimit:  holdLimit,
	})
	l.leftOne()
	h := &l.holders[len(l.holders)-1]
	if holdLimit != 0 {
		lv := a.liveness()
		lv.LimitedHoldsGranted = append(lv.LimitedHoldsGranted, l.limitedHold(h))
	}
	return h
}

// limitedHold describes h, a hold of l with a hold limit, for the leader's
// liveness tracker.
func (l *lock) limitedHold(h *holder) *fsmpb.LimitedHold {
	return &fsmpb.LimitedHold{SessionId: h.s.id, Lock: l.name, Token: h.token, HoldLimitNanos: int64(msDuration(h.holdLimit)), OwnerKey: h.ownerKey}
}

// grantWaiters grants l to waiters from the head of its queue while the head
// fits beside the holders, with this entry's index as token, and deletes l
// if nobody holds or waits for it and no lock-delay runs. Only as many
// waiters as there is room for are woken, in queue order: a shared waiter
// behind an exclusive one waits for it, so a stream of readers cannot
// starve a writer. A lock in its lock-delay is granted to no one.
func (m *Machine) grantWaiters(a *apply, l *lock) {
	for !l.delayed() && len(l.waiters()) > 0 && l.grantable(&l.waiters()[0]) {
		m.changeLock(l)
		w := l.popWaiter()
		s := w.s
		s.dropWait(waitKey{l.name, w.acquireSeq})
		m.hold(a, l, s, w.ownerKey, w.acquireSeq, uint32(w.limit), w.shared, w.holdLimit, w.lockDelay)
		s.granted(w.acquireSeq, l.name, a.index, 1) // s changed in hold
		a.res.Grants = append(a.res.Grants, &fsmpb.Grant{
			SessionId:  s.id,
			AcquireSeq: w.acquireSeq,
			Lock:       l.name,
			Token:      a.index,
			Shared:     w.shared,
		})
		if m.LogVersion() >= DeadlockAtGrantVersion {
			m.reenterWaits(a, l, s, w.ownerKey)
		}
		m.mayStall(a, s, w.ownerKey)
	}
	if len(l.holders) == 0 && len(l.waiters()) == 0 && !l.delayed() {
		delete(m.locks, l.name)
		m.lockTree.Delete(l.lockState)
	}
}

func (m *Machine) acquire(a *apply, s *session, op *fsmpb.Acquire) {
	if !a.needSession(s, "acquire") {
		return
	}
	if err := checkLockName(op.GetLock()); err != nil {
		a.refuse(err)
		return
	}
	if err := checkOwnerKey(op.GetOwnerKey()); err != nil {
		a.refuse(err)
		return
	}
	if op.GetWait() {
		if a.seq == 0 {
			a.refuse(invalid("acquire with wait needs seq >= 1 to name the waiter"))
			return
		}
		if op.GetWaitTimeoutNanos() < 0 {
			a.refuse(invalid("wait timeout %v is negative", nanos(op.GetWaitTimeoutNanos())))
			return
		}
	}
	limit, err := checkLimit(op.GetLimit())
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

	name, shared := op.GetLock(), op.GetShared()
	l := m.locks[name]
	if l != nil {
		h := l.holderOf(s, op.GetOwnerKey())
		if err := l.fits(h, limit, shared); err != nil {
			a.refuse(err)
			return
		}
		if h != nil && h.holdLimit != holdLimit {
			a.refuse(errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
				"session %d key %s holds lock %s with a hold limit of %v; this acquire says %v",
				s.id, quote(h.ownerKey), quote(name), msDuration(h.holdLimit), msDuration(holdLimit)))
			return
		}
		if h != nil && h.lockDelay != lockDelay {
			a.refuse(errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
				"session %d key %s holds lock %s with a lock-delay of %v; this acquire says %v",
				s.id, quote(h.ownerKey), quote(name), secDuration(h.lockDelay), secDuration(lockDelay)))
			return
		}
		if h != nil {
			if h.count == math.MaxUint32 {
				a.refuse(errorf(fsmpb.Error_ERROR_TOO_MANY_HOLDS,
					"reentrant count of lock %s is at its limit %d", quote(name), uint32(math.MaxUint32)))
				return
			}
			h = m.changeHolder(l, h)
			h.count++
			a.res.Acquire = a.granted(name, h)
			return
		}
	}
	if l == nil || l.grantsAtOnce(shared) {
		if s.load() >= MaxHoldsPerSession {
			a.refuse(tooManyHolds(s))
			return
		}
		h := m.hold(a, m.lockFor(name), s, op.GetOwnerKey(), a.seq, limit, shared, holdLimit, lockDelay)
		a.res.Acquire = a.granted(name, h)
		return
	}
	if !op.GetWait() {
		o := a.newOutcome()
		o.Lock, o.Status, o.Holder = name, fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY, l.currentHolder()
		l.delayedOutcome(o)
		a.res.Acquire = o
		return
	}
	if len(l.waiters()) >= MaxWaitersPerLock {
		a.refuse(errorf(fsmpb.Error_ERROR_TOO_MANY_WAITERS,
			"lock %s has %d waiters; the limit is %d", quote(name), len(l.waiters()), MaxWaitersPerLock))
		return
	}
	if s.load() >= MaxHoldsPerSession {
		a.refuse(tooManyHolds(s))
		return
	}
	if m.refuseDeadlock(a, l, s, op.GetOwnerKey(), shared) {
		return
	}
	m.changeLock(l)
	l.enqueue(waiter{
		s:          s,
		ownerKey:   op.GetOwnerKey(),
		acquireSeq: a.seq,
		timeout:    op.GetWaitTimeoutNanos(),
		since:      a.wall,
		limit:      uint16(limit),
		shared:     shared,
		lockDelay:  lockDelay,
		holdLimit:  holdLimit,
	})
	s.addWait(waitKey{name, a.seq}, op.GetOwnerKey())
	if t := op.GetWaitTimeoutNanos(); t > 0 {
		a.liveness().WaitQueued = &fsmpb.WaitQueued{SessionId: s.id, AcquireSeq: a.seq, Lock: name, WaitTimeoutNanos: t}
	}
	o := a.newOutcome()
	o.Lock, o.Status, o.Holder = name, fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED, l.currentHolder()
	o.Position = uint32(len(l.waiters()))
	l.delayedOutcome(o)
	a.res.Acquire = o
}

// checkLimit returns the holder limit an acquire states (0 means 1), or
// why it cannot be one.
func checkLimit(limit uint32) (uint32, *Error) {
	if err := refusal(rules.CheckHolderLimit(limit)); err != nil {
		return 0, err
	}
	return max(limit, 1), nil
}

// checkHoldLimit returns an acquire's hold limit in milliseconds (0: none),
// or why it cannot be one.
func checkHoldLimit(d int64) (uint32, *Error) {
	if err := refusal(rules.CheckHoldLimitNanos(d)); err != nil {
		return 0, err
	}
	return uint32(nanos(d) / millisecond), nil
}

// msDuration is a hold limit kept in milliseconds, in nanos.
func msDuration(ms uint32) nanos { return nanos(ms) * millisecond }

// fits returns nil if an acquire of l with this limit and mode agrees with
// l: the same limit (any, while no one holds or waits for it: a lock in
// its lock-delay keeps no limit), and for a reentrant acquire (h, the acquirer's hold,
// is not nil) the mode of the hold it re-enters (a shared hold does not
// become exclusive: two readers doing so would wait for each other
// forever; nor the other way, so a hold's mode never changes).
func (l *lock) fits(h *holder, limit uint32, shared bool) *Error {
	if have := l.limit(); have != limit && (len(l.holders) > 0 || len(l.waiters()) > 0) {
		return errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
			"lock %s admits %d holders; this acquire says %d (one name must not serve two kinds of lock)",
			quote(l.name), have, limit)
	}
	if h != nil && h.shared != shared {
		return errorf(fsmpb.Error_ERROR_LIMIT_MISMATCH,
			"session %d key %s holds lock %s %s; it cannot take it again %s",
			h.s.id, quote(h.ownerKey), quote(l.name), mode(h.shared), mode(shared))
	}
	return nil
}

func tooManyHolds(s *session) *Error {
	return errorf(fsmpb.Error_ERROR_TOO_MANY_HOLDS,
		"session %d holds or waits for %d locks; the limit is %d", s.id, s.load(), MaxHoldsPerSession)
}

func grantedOutcome(name string, h *holder) *fsmpb.AcquireOutcome {
	return &fsmpb.AcquireOutcome{
		Lock:   name,
		Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED,
		Token:  h.token,
		Count:  h.count,
	}
}

// granted is grantedOutcome in a's outcome (see newOutcome).
func (a *apply) granted(name string, h *holder) *fsmpb.AcquireOutcome {
	o := a.newOutcome()
	o.Lock, o.Status, o.Token, o.Count = name, fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED, h.token, h.count
	return o
}

func (m *Machine) release(a *apply, s *session, op *fsmpb.Release) {
	if !a.needSession(s, "release") {
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
	if op.GetToken() == 0 {
		a.refuse(invalid("release of lock %s needs the hold's token", quote(name)))
		return
	}
	l := m.locks[name]
	if l == nil || len(l.holders) == 0 {
		a.refuse(errorf(fsmpb.Error_ERROR_LOCK_NOT_FOUND, "lock %s is not held", quote(name)))
		return
	}
	h := l.holderOf(s, op.GetOwnerKey())
	if h == nil {
		cur := &l.holders[0]
		if len(l.holders) > 1 {
			a.refuse(errorf(fsmpb.Error_ERROR_NOT_HOLDER,
				"lock %s has %d holders, and session %d key %s is not one of them",
				quote(name), len(l.holders), s.id, quote(op.GetOwnerKey())))
			return
		}
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_HOLDER,
			"lock %s is held by session %d key %s, not by session %d key %s",
			quote(name), cur.s.id, quote(cur.ownerKey), s.id, quote(op.GetOwnerKey())))
		return
	}
	if h.token != op.GetToken() {
		a.refuse(errorf(fsmpb.Error_ERROR_TOKEN_MISMATCH,
			"lock %s is held with token %d, not %d", quote(name), h.token, op.GetToken()))
		return
	}
	h = m.changeHolder(l, h)
	h.count--
	a.res.RemainingCount = h.count
	if h.count > 0 {
		return
	}
	m.endOwnHold(a, l, h, EndReleased)
}

// endOwnHold ends h at its own session's request (a Release, or an
// abandoned CancelWait, taking its last count): no one is told the hold
// was lost, but a limited hold is reported in
// liveness.limited_hold_released so the leader's tracker stops its clock.
func (m *Machine) endOwnHold(a *apply, l *lock, h *holder, how HoldEnd) {
	if h.holdLimit != 0 {
		a.liveness().LimitedHoldReleased = l.limitedHold(h)
	}
	m.endHold(a, l, h, how)
}

// endHold removes the holder record h from l, records how it ended
// (past.go) and hands l on, after its lock-delay if the way it ended
// starts one (delay.go).
func (m *Machine) endHold(a *apply, l *lock, h *holder, how HoldEnd) {
	m.recordEnd(a, l, h, how)
	s, token, idx, delay, ownerKey := h.s, h.token, h.idx, h.lockDelay, h.ownerKey
	h = m.changeHolder(l, h)
	m.dropRevocation(a, l, h)
	l.removeHolder(h)
	m.changeSession(s)
	m.dropHold(s, idx)
	s.holdEnded(l.name, token, ownerKey)
	if delay != 0 && how.delays() {
		m.startDelay(a, l, delay)
	}
	m.grantWaiters(a, l)
}

func (m *Machine) casRelease(a *apply, op *fsmpb.CasRelease) {
	name := op.GetLock()
	if err := checkLockName(name); err != nil {
		a.refuse(err)
		return
	}
	if op.GetSessionId() == 0 {
		a.refuse(invalid("cas_release of lock %s needs the holder's session id", quote(name)))
		return
	}
	l := m.locks[name]
	if l == nil || len(l.holders) == 0 {
		a.refuse(errorf(fsmpb.Error_ERROR_LOCK_NOT_FOUND, "lock %s is not held", quote(name)))
		return
	}
	h := l.holderWith(op.GetSessionId(), op.GetToken())
	if h == nil {
		cur := &l.holders[0]
		a.refuse(errorf(fsmpb.Error_ERROR_TOKEN_MISMATCH,
			"lock %s is held by session %d with token %d, not by session %d with token %d",
			quote(name), cur.s.id, cur.token, op.GetSessionId(), op.GetToken()))
		return
	}
	m.endHoldOfAnother(a, l, h, EndCasReleased)
}

// holderWith returns the hold of l by session with token (any token when
// token is 0), or nil.
func (l *lock) holderWith(session, token uint64) *holder {
	for i := range l.holders {
		if h := &l.holders[i]; h.s.id == session && (token == 0 || h.token == token) {
			return h
		}
	}
	return nil
}

// expiringHold returns the hold of l that an ExpireHold names from
// SameTokenHoldsVersion on (see expireHold), or nil.
func (l *lock) expiringHold(op *fsmpb.ExpireHold) *holder {
	var first *holder
	for i := range l.holders {
		h := &l.holders[i]
		if h.s.id != op.GetSessionId() || h.token != op.GetToken() {
			continue
		}
		switch {
		case op.OwnerKey != nil:
			if h.ownerKey == op.GetOwnerKey() {
				return h
			}
		case h.holdLimit != 0:
			return h
		case first == nil:
			first = h // none has a limit: refused for it
		}
	}
	return first
}

// endHoldOfAnother ends h, which its session did not ask to end (an
// operator's CasRelease, the leader's ExpireHold), and reports it in
// holds_ended so the holding session is told.
func (m *Machine) endHoldOfAnother(a *apply, l *lock, h *holder, how HoldEnd) {
	a.res.HoldsEnded = append(a.res.HoldsEnded, &fsmpb.HoldEnded{
		SessionId: h.s.id, Lock: l.name, OwnerKey: h.ownerKey, Token: h.token,
	})
	m.endHold(a, l, h, how)
}

// expireHold ends a hold whose limit passed on the leader's clock.
//
// One entry that grants one session a lock under two owner keys gives
// both holds its index as token. Below SameTokenHoldsVersion the command
// names the first of them in holder order, and is refused if that one
// has no limit. From it, the command's owner key names the hold, and
// without one (a leader's command written below the version) the first
// of them that has a limit.
func (m *Machine) expireHold(a *apply, s *session, op *fsmpb.ExpireHold) {
	name := op.GetLock()
	if !a.leaderCommand(s, "expire_hold", name) {
		return
	}
	switch {
	case op.GetSessionId() == 0 || op.GetToken() == 0:
		a.refuse(invalid("expire_hold of lock %s needs the hold's session id and token", quote(name)))
		return
	}
	l := m.locks[name]
	var h *holder
	switch {
	case l == nil:
	case m.LogVersion() < SameTokenHoldsVersion:
		h = l.holderWith(op.GetSessionId(), op.GetToken()) // token != 0
	default:
		h = l.expiringHold(op)
	}
	switch {
	case h == nil:
		a.refuse(errorf(fsmpb.Error_ERROR_NOT_HOLDER,
			"lock %s has no hold of session %d with token %d (it ended first)", quote(name), op.GetSessionId(), op.GetToken()))
		return
	case h.holdLimit == 0:
		a.refuse(invalid("the hold of lock %s by session %d (token %d) has no hold limit", quote(name), op.GetSessionId(), op.GetToken()))
		return
	}
	m.endHoldOfAnother(a, l, h, EndHoldExpired)
}

// quote formats a name for a message: Go-quoted, so odd characters show.
func quote(s string) string { return strconv.Quote(s) }
