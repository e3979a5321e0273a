package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

type opKind int

const (
	opNone opKind = iota
	opOpen
	opAcquireTry
	opAcquireWait
	opRelease
	opCheck
	opClose
	opExpire     // proposed by a leader's liveness tracker
	opAbandon    // a member's cleanup for a waiting caller that went away
	opExpireHold // proposed by a leader's liveness tracker: a hold limit passed
	// opAcquireMany tries several locks in one entry (acquire_many). The
	// history gets one try per lock it answered for (a skipped lock is
	// left alone), at the same call and return.
	opAcquireMany
	// opEndRevoked is proposed by a leader's liveness tracker: a revoked
	// hold's grace passed (revoke.go). The model takes it as ExpireHold.
	opEndRevoked
	// opProclaim sets the value of a mutex the client holds (Proclaim).
	opProclaim
)

func (k opKind) String() string {
	return [...]string{"none", "open", "try", "wait", "release", "check", "close", "expire", "abandon", "expire-hold", "many", "end-revoked", "proclaim"}[k]
}

// clientOp is a client's outstanding operation, across its retries.
type clientOp struct {
	kind      opKind
	session   uint64
	lock      string
	key       string // acquires, releases, proclaims: the owner key (Config.Keys)
	token     uint64
	seq       uint64
	cmd       *fsmpb.Command
	call      int64 // history position of the call
	firstSent int64 // virtual time of the first attempt
	tries     int
	attempt   uint64
	sentAt    int64
	holdLimit time.Duration // acquires: the hold's limit, 0 if none
	reentrant bool          // acquires: of a hold the client has (count + 1)
	// concurrent: acquires made while the client's other worker waited
	// (Config.Keys), whose grant may re-enter that wait's (re-entered
	// at its grant, count + 1).
	concurrent bool
	// acquire_many: its locks, and the outcomes of its answer
	locks   []string
	manyOut []*fsmpb.AcquireOutcome
	// waits
	waitTimeout time.Duration
	cancelAt    int64
	queued      bool   // the server said QUEUED for this session's seq
	target      uint64 // the member the current attempt went to
	retried     bool   // some attempt's outcome was unknown
	cancelling  bool
}

// client is one simulated application process with at most one session.
type client struct {
	s  *Sim
	id int

	session    uint64
	ttl        time.Duration
	validUntil int64 // client-side deadline: sendTime + TTL - margin
	seq        uint64
	leader     uint64
	// What the client believes it holds, per (lock, owner key): one
	// hold each (Config.Keys).
	holds     map[holdRef]uint64 // believed holds: → token
	counts    map[holdRef]uint32 // believed holds: → reentrant count
	holdUntil map[holdRef]int64  // believed holds with a hold limit: → the client's deadline
	holdLimit map[holdRef]time.Duration
	renewing  map[holdRef]bool // holds the client renews (the others run out)
	tainted   map[holdRef]bool // acquires with unknown outcome this session
	// revokedEarly: revocations the client was told of for holds it did
	// not know it had yet (the grant's answer still to come, say a retry
	// after a lost one), as the Go client keeps them for the Lease the
	// answer makes.
	revokedEarly map[holdRef]uint64
	opening      bool
	// secret is the hash of the session's secret, drawn at each open (its
	// retries show the same one); every request for the session shows it.
	secret []byte

	op *clientOp
	// bg is a queued wait that the client's other worker left waiting
	// while the client went on (Config.Keys): answered, retried and
	// cancelled as op is.
	bg          *clientOp
	nextAttempt uint64

	// One hold renewal at a time, like keepalives beside the operation.
	rnAttempt  uint64
	rnSentAt   int64
	rnRef      holdRef
	rnToken    uint64
	rnSession  uint64
	rnInFlight bool

	kaPausedUntil int64
	kaAttempt     uint64
	kaSentAt      int64
	kaSession     uint64
	kaInFlight    bool
	gcPause       bool
}

func newClient(s *Sim, id int) *client {
	return &client{s: s, id: id, holds: map[holdRef]uint64{}, counts: map[holdRef]uint32{}, holdUntil: map[holdRef]int64{}, holdLimit: map[holdRef]time.Duration{},
		renewing: map[holdRef]bool{}, tainted: map[holdRef]bool{}, revokedEarly: map[holdRef]uint64{}}
}

func (c *client) lockName(i int) string { return fmt.Sprintf("lock/%d", i) }

func (c *client) String() string { return fmt.Sprintf("c%d", c.id) }

// think is the client's main loop, run every few tens of milliseconds.
func (c *client) think() {
	s := c.s
	if s.calm {
		return
	}
	defer s.after(s.dur(5*time.Millisecond, 60*time.Millisecond), c.think)
	if c.session != 0 && s.now >= c.validUntil {
		c.lose("deadline passed")
	}
	for _, r := range sortedRefs(c.holdUntil) {
		if s.now >= c.holdUntil[r] {
			// The hold limit passed, as the client counts it: it no
			// longer believes it holds the lock, nor takes it again
			// under that key this session (the server may still hold it
			// for it a while).
			c.forget(r)
			c.tainted[r] = true
		}
	}
	if c.session == 0 {
		if c.op == nil && !c.opening {
			c.open()
		}
		return
	}
	c.keepAlive()
	c.renewHolds()
	if w := c.bg; w != nil && w.queued && !w.cancelling && w.cancelAt != 0 && s.now >= w.cancelAt {
		c.cancelWait(w)
	}
	if c.op != nil {
		if c.op.kind == opAcquireWait && c.op.queued && !c.op.cancelling && c.op.cancelAt != 0 && s.now >= c.op.cancelAt {
			c.cancelWait(c.op)
		} else if c.op.kind == opAcquireWait && c.op.queued && !c.op.cancelling && s.rng.IntN(100) < 5 {
			c.dropConn()
		} else {
			c.leaveWaiting()
		}
		return
	}
	held := sortedRefs(c.holds)
	switch k := s.rng.IntN(100); {
	case k < 30 && len(held) > 0:
		r := held[s.rng.IntN(len(held))]
		c.write(r, c.holds[r])
	case k < 50 && len(held) > 0:
		r := held[s.rng.IntN(len(held))]
		tok := c.holds[r]
		if c.counts[r] <= 1 {
			c.forget(r) // stop using it before asking
		}
		c.seq++
		c.start(&clientOp{kind: opRelease, lock: r.lock, key: r.key, token: tok, seq: c.seq, cmd: &fsmpb.Command{
			SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(),
			Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: r.lock, Token: tok, OwnerKey: r.key}},
		}})
	case k < 56 && len(held) > 0:
		r := held[s.rng.IntN(len(held))]
		c.start(&clientOp{kind: opCheck, lock: r.lock, token: c.holds[r]})
	case k < 59:
		l := c.lockName(s.rng.IntN(s.cfg.Locks))
		c.start(&clientOp{kind: opCheck, lock: l, token: uint64(s.rng.IntN(50))})
	case s.cfg.Many && k < 68 && k >= 60:
		c.tryMany()
	case s.cfg.Reentrant && k >= 68 && k < 74 && len(held) > 0:
		c.reenter(held)
	case s.cfg.Values && k >= 74 && k < 79 && len(held) > 0:
		c.proclaim(held)
	case k < 60:
		clear(c.holds)
		clear(c.counts)
		clear(c.holdUntil)
		c.seq++
		c.start(&clientOp{kind: opClose, seq: c.seq, cmd: &fsmpb.Command{
			SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(),
			Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}},
		}})
	default:
		l := c.lockName(s.rng.IntN(s.cfg.Locks))
		semaphore := s.cfg.Semaphores > 0 && s.rng.IntN(4) == 0
		if semaphore {
			l = fmt.Sprintf("sem/%d", s.rng.IntN(s.cfg.Semaphores))
		}
		if c.waiting() && !isSemaphore(c.bg.lock) && s.rng.IntN(3) == 0 {
			// The lock the other worker waits for: under its key, a wait
			// re-enters its grant, or is ended as deadlocked behind it
			// (another hold limit).
			l, semaphore = c.bg.lock, false
		}
		// Under either key, with Config.Keys: as a second worker of the
		// session, which may hold the lock under the other.
		key := c.drawKey()
		if _, ok := c.holds[holdRef{l, key}]; ok || c.tainted[holdRef{l, key}] || c.waitsFor(holdRef{l, key}) && semaphore {
			return
		}
		c.seq++
		op := &clientOp{kind: opAcquireTry, lock: l, key: key, seq: c.seq, concurrent: c.bg != nil}
		acq := &fsmpb.Acquire{Lock: l, OwnerKey: key, LockDelayNanos: int64(s.lockDelayOf(l))}
		if semaphore {
			// Mostly permits (shared); one in three a writer of the
			// same lock (exclusive), as a read/write lock has.
			acq.Shared, acq.Limit = s.rng.IntN(3) > 0, SemaphorePermits
		} else if s.cfg.Values && s.rng.IntN(2) == 0 {
			acq.Value = fmt.Sprintf("c%d/%d", c.id, c.seq) // an election's candidate
		}
		if s.cfg.HoldLimits && s.rng.IntN(3) == 0 {
			op.holdLimit = time.Duration(1000+s.rng.IntN(1000)) * time.Millisecond
			acq.HoldLimitNanos = int64(op.holdLimit)
		}
		// While the other worker waits, two in three wait too: a node
		// that waits for two locks at once is what a grant or a cancel
		// can leave deadlocked.
		if s.rng.IntN(3) == 0 || c.waiting() && s.rng.IntN(2) == 0 {
			op.kind = opAcquireWait
			op.waitTimeout = s.dur(50*time.Millisecond, 1500*time.Millisecond)
			acq.Wait, acq.WaitTimeoutNanos = true, int64(op.waitTimeout)
			if s.rng.IntN(3) == 0 {
				op.cancelAt = s.now + int64(s.dur(20*time.Millisecond, op.waitTimeout))
			}
		}
		op.cmd = &fsmpb.Command{SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(), Op: &fsmpb.Command_Acquire{Acquire: acq}}
		c.start(op)
	}
}

// reenter acquires again one of the mutexes it holds, under the hold's
// owner key, with the hold's limit (the state machine refuses another):
// granted at once, same token, count + 1, whether it asks to wait or not.
func (c *client) reenter(held []holdRef) {
	s := c.s
	r, ok := c.someMutex(held)
	if !ok {
		return
	}
	l := r.lock
	c.seq++
	op := &clientOp{kind: opAcquireTry, lock: l, key: r.key, seq: c.seq, reentrant: true, concurrent: c.bg != nil}
	acq := &fsmpb.Acquire{Lock: l, OwnerKey: r.key, LockDelayNanos: int64(s.lockDelayOf(l))}
	if _, ok := c.holdUntil[r]; ok {
		op.holdLimit = c.holdLimit[r]
		acq.HoldLimitNanos = int64(op.holdLimit)
	}
	if s.rng.IntN(3) == 0 {
		op.kind = opAcquireWait
		op.waitTimeout = s.dur(50*time.Millisecond, 1500*time.Millisecond)
		acq.Wait, acq.WaitTimeoutNanos = true, int64(op.waitTimeout)
	}
	op.cmd = &fsmpb.Command{SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(), Op: &fsmpb.Command_Acquire{Acquire: acq}}
	c.start(op)
}

// proclaim sets a new value on one of the mutexes it holds, naming the
// hold by its token (an election's leader publishing a new address).
func (c *client) proclaim(held []holdRef) {
	r, ok := c.someMutex(held)
	if !ok {
		return
	}
	c.seq++
	c.start(&clientOp{kind: opProclaim, lock: r.lock, key: r.key, token: c.holds[r], seq: c.seq, cmd: &fsmpb.Command{
		SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(),
		Op: &fsmpb.Command_Proclaim{Proclaim: &fsmpb.Proclaim{Lock: r.lock, Token: c.holds[r], OwnerKey: r.key, Value: fmt.Sprintf("c%d/%d/p", c.id, c.seq)}},
	}})
}

// someMutex picks one of the holds of mutexes among held, if there is one.
func (c *client) someMutex(held []holdRef) (holdRef, bool) {
	var mutexes []holdRef
	for _, r := range held {
		if !isSemaphore(r.lock) {
			mutexes = append(mutexes, r)
		}
	}
	if len(mutexes) == 0 {
		return holdRef{}, false
	}
	return mutexes[c.s.rng.IntN(len(mutexes))], true
}

// tryMany tries some of the mutexes it neither holds nor is unsure of in
// one acquire_many, each on its own or all or none; now and then with a
// semaphore too, in a mode of its own (a mixed set). One owner key for
// all of them (AcquireMany.owner_key).
func (c *client) tryMany() {
	s := c.s
	key := c.drawKey()
	var names []string
	for _, i := range s.rng.Perm(s.cfg.Locks) {
		l := c.lockName(i)
		if _, ok := c.holds[holdRef{l, key}]; ok || c.tainted[holdRef{l, key}] {
			continue
		}
		names = append(names, l)
	}
	if len(names) == 0 {
		return
	}
	names = names[:1+s.rng.IntN(len(names))]
	c.seq++
	op := &clientOp{kind: opAcquireMany, locks: names, key: key, seq: c.seq, concurrent: c.bg != nil}
	am := &fsmpb.AcquireMany{Locks: names, OwnerKey: key, All: s.rng.IntN(2) == 0}
	if sem := fmt.Sprintf("sem/%d", s.rng.IntN(max(s.cfg.Semaphores, 1))); s.cfg.Semaphores > 0 && s.rng.IntN(3) == 0 &&
		!c.tainted[holdRef{sem, key}] && !c.holdsLock(holdRef{sem, key}) && !c.waitsFor(holdRef{sem, key}) {
		// A mixed set: the mutexes and a semaphore's permit (or its
		// writer, as for a single acquire), each lock in its own mode.
		op.locks = append(names, sem)
		am.Locks = op.locks
		for range names {
			am.Modes = append(am.Modes, &fsmpb.LockMode{})
		}
		am.Modes = append(am.Modes, &fsmpb.LockMode{Shared: s.rng.IntN(3) > 0, Limit: SemaphorePermits})
	}
	for _, l := range op.locks {
		am.LockDelayNanos = max(am.LockDelayNanos, int64(s.lockDelayOf(l)))
	}
	if s.cfg.HoldLimits && s.rng.IntN(3) == 0 {
		op.holdLimit = time.Duration(1000+s.rng.IntN(1000)) * time.Millisecond
		am.HoldLimitNanos = int64(op.holdLimit)
	}
	op.cmd = &fsmpb.Command{SessionId: c.session, Seq: c.seq, MinUnackedSeq: c.minUnacked(), Op: &fsmpb.Command_AcquireMany{AcquireMany: am}}
	c.start(op)
}

func (c *client) open() {
	c.opening = true
	c.ttl = []time.Duration{time.Second, 2 * time.Second}[c.s.rng.IntN(2)]
	c.secret = c.s.drawSecret()
	open := &fsmpb.OpenSession{TtlNanos: int64(c.ttl), Owner: fmt.Sprintf("client-%d", c.id), SecretHash: c.secret}
	if c.s.rng.IntN(4) > 0 {
		// As the library does: a retry finds the session an earlier
		// attempt opened. (Without, a lost answer leaves an orphan.)
		open.Nonce = c.s.rng.Uint64() | 1
	}
	c.start(&clientOp{kind: opOpen, cmd: &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: open}}})
}

func (c *client) start(op *clientOp) {
	op.session = c.session
	if op.kind != opOpen {
		op.call = c.s.chk.call()
		if op.cmd != nil {
			op.cmd.SecretHash = c.secret
		}
	}
	c.op = op
	c.send(op)
}

// target picks the member to ask: the believed leader, else any.
func (c *client) target() uint64 {
	if c.leader != 0 {
		return c.leader
	}
	return c.s.peers[c.s.rng.IntN(len(c.s.peers))]
}

func (c *client) send(op *clientOp) {
	s := c.s
	c.nextAttempt++
	op.attempt = c.nextAttempt
	op.sentAt = s.now
	if op.firstSent == 0 {
		op.firstSent = s.now
	}
	r := &request{from: c, attempt: op.attempt}
	switch op.kind {
	case opCheck:
		r.kind, r.lock, r.token = reqCheck, op.lock, op.token
	default:
		r.kind = reqPropose
		r.cmd = cloneCmd(op.cmd)
		if op.cancelling {
			r.cmd = &fsmpb.Command{SessionId: op.session, SecretHash: op.cmd.GetSecretHash(), Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
				Lock: op.lock, SessionId: op.session, AcquireSeq: op.seq,
			}}}
		}
	}
	timeout := reqTimeout
	if op.kind == opAcquireWait && !op.cancelling {
		timeout += op.waitTimeout
	}
	attempt := op.attempt
	target := c.target()
	op.target = target
	s.after(timeout, func() {
		if c.current(op) && op.attempt == attempt {
			if op.kind == opAcquireWait && !op.cancelling {
				s.sendAbandon(target, op.session, op.seq)
			}
			c.answer(op, &response{attempt: attempt, unknown: true})
		}
	})
	s.sendRequest(target, r)
}

// dropConn: the client's connection breaks while its acquire waits in
// the queue. The member sees its caller go away and abandons the wait
// (cancelling it, or releasing a grant that crossed the cancel, in one
// entry). With Config.RetryAbandoned the client then retries the same
// seq, as the exactly-once contract allows; see TestAbandonedWaitRetry.
func (c *client) dropConn() {
	op := c.op
	c.s.stats.ConnDrops++
	c.s.sendAbandon(op.target, op.session, op.seq)
	op.queued = false
	if !c.s.cfg.RetryAbandoned {
		// The caller went away for good: its outcome stays unknown.
		op.retried = true
		c.finish(op, outcome{unknown: true})
		return
	}
	c.answer(op, &response{attempt: op.attempt, unknown: true})
}

func (c *client) cancelWait(op *clientOp) {
	op.cancelling = true
	op.tries = 0
	c.send(op)
}

// onResponse is an answer's arrival at the client.
func (c *client) onResponse(r *response) {
	c.s.checkOwnAnswer(c, r)
	if r.attempt == c.kaAttempt && c.kaInFlight {
		c.onKeepAlive(r)
		return
	}
	if r.attempt == c.rnAttempt && c.rnInFlight {
		c.onRenewal(r)
		return
	}
	op := c.opFor(r.attempt)
	if op == nil {
		return // a late answer to an abandoned attempt
	}
	c.answer(op, r)
}

func (c *client) answer(op *clientOp, r *response) {
	s := c.s
	switch {
	case r.queued:
		op.queued = true
		return
	case r.notLeader:
		c.leader = r.hint
		if c.leader == 0 || s.rng.IntN(4) == 0 {
			c.leader = s.peers[s.rng.IntN(len(s.peers))]
		}
		c.retryLater(op, false)
		return
	case r.retry:
		c.retryLater(op, false)
		return
	case r.noSpace:
		c.noSpaceTold(op)
		return
	case r.unknown:
		c.leader = 0
		op.retried = true
		if op.tries++; op.tries < maxTries && !s.calm {
			c.retryLater(op, true)
			return
		}
		c.finish(op, outcome{unknown: true})
		return
	}
	switch op.kind {
	case opOpen:
		c.op, c.opening = nil, false
		if err := r.res.GetError(); err != fsmpb.Error_ERROR_NONE {
			return
		}
		c.session = r.res.GetSessionId()
		// From the first attempt's send: this answer may be a retry's,
		// naming the session an earlier attempt opened (the nonce).
		c.validUntil = op.firstSent + int64(c.ttl-safetyMargin)
		c.seq = 0
		clear(c.holds)
		clear(c.counts)
		clear(c.tainted)
		clear(c.revokedEarly)
		s.tracef("client %d session %d", c.id, c.session)
		return
	case opCheck:
		c.finish(op, outcome{held: r.held, value: r.value})
		return
	}
	if op.cancelling {
		res := r.res
		switch {
		case res.GetError() == fsmpb.Error_ERROR_NONE:
			c.finish(op, outcome{code: fsmpb.Error_ERROR_WAIT_CANCELLED})
		case res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
			c.finish(op, outcome{granted: true, token: res.GetAcquire().GetToken()})
		default:
			// Not waiting any more: ended somehow, or granted and
			// already gone with the session. Ambiguous for the model.
			c.finish(op, outcome{code: res.GetError(), ambiguous: true})
		}
		return
	}
	if r.grant != nil {
		c.finish(op, outcome{granted: true, token: r.grant.GetToken()})
		return
	}
	if r.ended != nil {
		c.finish(op, outcome{code: r.ended.GetError()})
		return
	}
	res := r.res
	if err := res.GetError(); err != fsmpb.Error_ERROR_NONE {
		c.finish(op, outcome{code: err})
		return
	}
	if op.kind == opAcquireMany {
		op.manyOut = res.GetAcquireMany()
		c.finish(op, outcome{})
		return
	}
	if a := res.GetAcquire(); a != nil {
		switch a.GetStatus() {
		case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
			c.finish(op, outcome{granted: true, token: a.GetToken(), count: a.GetCount()})
		case fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY:
			c.finish(op, outcome{busy: true, delayed: a.GetDelayedUntilUnixNano() != 0})
		case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
			// A retry learnt the wait is still queued (cached result):
			// keep waiting, on the member that answered.
			op.queued = true
		}
		return
	}
	c.finish(op, outcome{remaining: res.GetRemainingCount()})
}

func (c *client) retryLater(op *clientOp, unknown bool) {
	d := c.s.dur(time.Millisecond, 20*time.Millisecond)
	if unknown {
		d = c.s.dur(20*time.Millisecond, 150*time.Millisecond)
	}
	op.attempt = 0 // ignore answers to the old attempt
	c.s.after(d, func() {
		if c.current(op) {
			c.send(op)
		}
	})
}

// outcome is what the client learnt of an operation.
type outcome struct {
	unknown   bool
	ambiguous bool // a wait ended in a way that may have been a grant
	retried   bool // an attempt with an unknown outcome came before
	granted   bool
	busy      bool
	delayed   bool // busy: the lock was in its lock-delay
	token     uint64
	count     uint32
	held      bool
	remaining uint32
	code      fsmpb.Error
	value     string // check: the lock's holder's value (mutexes)
	noSpace   bool   // acquires: refused NO_SPACE (space.go)
}

func (c *client) finish(op *clientOp, o outcome) {
	s := c.s
	o.retried = op.retried
	if c.bg == op {
		c.bg = nil
	} else {
		c.op = nil
	}
	if op.kind == opOpen {
		c.opening = false
		return
	}
	s.stats.Ops++
	if o.unknown {
		s.stats.Unknown++
	}
	if o.delayed {
		s.stats.DelayedBusy++
	}
	if op.kind == opProclaim && !o.unknown && o.code == fsmpb.Error_ERROR_NONE {
		s.stats.Proclaims++
	}
	if o.value != "" {
		s.stats.ValuesRead++
	}
	if op.kind == opAcquireMany {
		c.finishMany(op, o)
		return
	}
	s.chk.record(c, op, o)
	s.tracef("client %d %v %v seq %d -> %+v", c.id, op.kind, holdRef{op.lock, op.key}, op.seq, o)
	c.believe(op, o)
}

// finishMany splits an acquire_many into one try per lock it answered
// for, for the history and the client's beliefs: an error or an unknown
// outcome is every lock's; a skipped lock (all or none, and not all) is
// left out.
func (c *client) finishMany(op *clientOp, o outcome) {
	s := c.s
	per := make(map[string]outcome, len(op.locks))
	if o.unknown || o.code != fsmpb.Error_ERROR_NONE || op.manyOut == nil {
		for _, l := range op.locks {
			per[l] = o
		}
	} else {
		for _, a := range op.manyOut {
			switch a.GetStatus() {
			case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
				per[a.GetLock()] = outcome{granted: true, token: a.GetToken(), count: a.GetCount(), retried: o.retried}
				if len(op.cmd.GetAcquireMany().GetModes()) > 0 {
					s.stats.MixedSetGrants++
				}
			case fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY:
				if a.GetDelayedUntilUnixNano() != 0 {
					per[a.GetLock()] = outcome{busy: true, delayed: true, retried: o.retried}
					continue
				}
				if a.GetHolder() == nil {
					// From the cache: the hold an earlier attempt got
					// has ended since (a single acquire's NOT_HOLDER).
					per[a.GetLock()] = outcome{code: fsmpb.Error_ERROR_NOT_HOLDER, retried: o.retried}
					continue
				}
				per[a.GetLock()] = outcome{busy: true, retried: o.retried}
			}
		}
	}
	for _, l := range op.locks {
		lo, ok := per[l]
		if !ok {
			continue
		}
		sub := *op
		sub.kind, sub.lock = opAcquireTry, l
		s.chk.record(c, &sub, lo)
		s.tracef("client %d many %v seq %d -> %+v", c.id, holdRef{l, op.key}, op.seq, lo)
		c.believe(&sub, lo)
	}
}

// shared reports whether op asks for lock in a shared mode: an acquire's,
// or the mode a mixed acquire_many gives lock.
func (op *clientOp) shared() bool {
	if am := op.cmd.GetAcquireMany(); am != nil {
		if i := slices.Index(am.GetLocks(), op.lock); i >= 0 && i < len(am.GetModes()) {
			return am.GetModes()[i].GetShared()
		}
		return am.GetShared()
	}
	return op.cmd.GetAcquire().GetShared()
}

func cloneCmd(c *fsmpb.Command) *fsmpb.Command {
	if c == nil {
		return nil
	}
	return protoClone(c)
}
