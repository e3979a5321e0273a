// Package liveness is the only place where a clock affects lock semantics.
// On the leader it keeps every session's deadline, every timed wait's,
// every hold limit's, every lock-delay's and every revocation's grace in
// memory, on the monotonic clock, and proposes ExpireSession,
// CancelWait, ExpireHold, EndLockDelay and EndRevokedHold commands when
// they pass. Nothing here is replicated: a new leader starts from its own
// promotion and grants every session a full TTL, every timed wait its
// full timeout, every limited hold its full limit, every lock-delay its
// full length and every revoked hold its full grace (DESIGN.md section
// 2, "Time").
package liveness

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Proposer puts the tracker's decisions into the log. Calls block until
// the command applies or fails; the tracker makes them on goroutines of
// its own.
type Proposer interface {
	ExpireSession(ctx context.Context, id uint64) error
	CancelWait(ctx context.Context, lock string, session, acquireSeq uint64) error
	// ExpireHold ends the hold of lock by session with token and owner
	// key (one session's holds of a lock under two keys share a token
	// when one entry granted both).
	ExpireHold(ctx context.Context, lock string, session, token uint64, ownerKey string) error
	EndLockDelay(ctx context.Context, lock string, delayFrom uint64) error
	EndRevokedHold(ctx context.Context, lock string, session, token uint64) error
}

var (
	// ErrNotLeader is returned by Heartbeat on a node that is not leading.
	ErrNotLeader = errors.New("liveness: not the leader")
	// ErrSessionLost is returned by Heartbeat for a session that is
	// unknown, expired, or whose expiry is being proposed.
	ErrSessionLost = errors.New("liveness: session lost")
	// ErrBlacklisted is returned by Heartbeat for a blacklisted session.
	ErrBlacklisted = errors.New("liveness: session is blacklisted")
	// ErrSecretMismatch is returned by Check and CheckHold when the
	// request did not show the session's secret.
	ErrSecretMismatch = errors.New("liveness: the request's session secret is not the session's (only its owner may act for it)")
	// ErrHoldLost is returned by RenewHold for a hold that is unknown (it
	// ended, or has no limit) or whose expiry is being proposed.
	ErrHoldLost = errors.New("liveness: hold lost")
	// ErrTooFast is returned by Admit for a keepalive over the session's
	// rate.
	ErrTooFast = errors.New("liveness: keepalives over the session's rate")
)

// RetryDelay is how long the tracker waits before proposing again a
// decision whose proposal failed (leader busy, leadership changing).
const RetryDelay = 100 * time.Millisecond

type session struct {
	ttl         time.Duration
	deadline    time.Time
	blacklisted bool
	expiring    bool
	secret      fsm.SecretHash // what its keepalives and renewals must show
	// paced is when the session's keepalives, one per interval of its
	// rate, are paid up to (Admit): the generic cell rate algorithm's
	// theoretical arrival time, a token bucket in one field.
	paced time.Time
}

type waitKey struct {
	lock    string
	session uint64
	seq     uint64
}

type wait struct {
	deadline   time.Time
	cancelling bool
}

// holdKey names a hold the tracker times. ownerKey is set for a
// revocation only: one session's holds of a lock under two owner keys,
// granted by one entry, share the token, and each revoked hold is timed
// and ended on its own (EndRevokedHold ends one of them apiece). A hold
// limit's key leaves it empty: a renewal names the lock, session and
// token only, so such holds share one limit's clock (hold.keys).
type holdKey struct {
	lock     string
	session  uint64
	token    uint64
	ownerKey string
}

type hold struct {
	limit    time.Duration
	deadline time.Time
	expiring bool
	// keys are the owner keys of the session's limited holds of the lock
	// with the token: mostly one; two or more when one entry granted
	// them all. Each gets an ExpireHold of its own when the limit passes;
	// limit is the longest of theirs (lengthen).
	keys []string
}

// revocation is a revoked hold's grace: when the leader ends the hold
// unless it ended first.
type revocation struct {
	deadline time.Time
	ending   bool
}

// lockDelay is a lock's running lock-delay (a lock is in one at most):
// the entry that started it, and when it ends.
type lockDelay struct {
	from     uint64
	deadline time.Time
	ending   bool
}

// Tracker keeps deadlines on the leader. Its methods are safe for
// concurrent use.
type Tracker struct {
	p   Proposer
	log *slog.Logger
	now func() time.Time

	// manual: no goroutines or timers; FireDue runs the proposals in the
	// caller's goroutine and retries wait in retries for the clock.
	manual  bool
	retries []retryAt

	mu       sync.Mutex
	leader   bool
	term     uint64
	sessions map[uint64]*session
	waits    map[waitKey]*wait
	holds    map[holdKey]*hold
	delays   map[string]*lockDelay // by lock name
	revokes  map[holdKey]*revocation
	queue    deadlines // every live deadline, lazily checked
	wake     chan struct{}
	wg       sync.WaitGroup
}

type retryAt struct {
	at    time.Time
	rearm func() // called with mu held
	term  uint64
}

// New returns a tracker that proposes through p. Run runs it.
func New(p Proposer, log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{
		p:        p,
		log:      log.With("component", "liveness"),
		now:      time.Now,
		sessions: make(map[uint64]*session),
		waits:    make(map[waitKey]*wait),
		holds:    make(map[holdKey]*hold),
		delays:   make(map[string]*lockDelay),
		revokes:  make(map[holdKey]*revocation),
		wake:     make(chan struct{}, 1),
	}
}

// NewManual returns a tracker for the deterministic simulation
// (internal/sim): it reads time from clock instead of time.Now, starts no
// goroutine or timer, and must not be Run. The caller calls FireDue at the
// times Next names. FireDue calls p in the caller's goroutine, so p must
// not block: it queues the proposal and returns an error only if it could
// not be queued, which the tracker retries RetryDelay later (on clock).
func NewManual(p Proposer, log *slog.Logger, clock func() time.Time) *Tracker {
	t := New(p, log)
	t.now = clock
	t.manual = true
	return t
}

// Promote makes the tracker lead: every live session gets a full TTL,
// every timed wait its full timeout, every limited hold its full limit,
// every running lock-delay its full length and every revoked hold its
// full grace, counted from now (the old leader's clock is gone; a delay
// or grace timed afresh ends no earlier than it would have). m is read
// during the call only.
func (t *Tracker) Promote(term uint64, m *fsm.Machine) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = true
	t.term = term
	clear(t.sessions)
	clear(t.waits)
	clear(t.holds)
	clear(t.delays)
	clear(t.revokes)
	for _, r := range m.Revocations() {
		t.revokes[holdKey{r.Lock, r.SessionID, r.Token, r.OwnerKey}] = &revocation{deadline: now.Add(time.Duration(r.GraceNanos))}
	}
	for _, d := range m.LockDelays() {
		t.delays[d.Lock] = &lockDelay{from: d.DelayFrom, deadline: now.Add(time.Duration(d.DelayNanos))}
	}
	for _, h := range m.LimitedHolds() {
		k := holdKey{h.Lock, h.SessionID, h.Token, ""}
		limit := time.Duration(h.LimitNanos)
		if cur := t.holds[k]; cur != nil {
			cur.keys = append(cur.keys, h.OwnerKey)
			cur.lengthen(limit, now)
			continue
		}
		t.holds[k] = &hold{limit: limit, deadline: now.Add(limit), keys: []string{h.OwnerKey}}
	}
	for _, s := range m.SessionIDs() {
		ttl := time.Duration(s.TTLNanos)
		t.sessions[s.ID] = &session{ttl: ttl, deadline: now.Add(ttl), blacklisted: s.Blacklisted, secret: s.SecretHash}
	}
	for _, w := range m.Waiters() {
		t.waits[waitKey{w.Lock, w.SessionID, w.AcquireSeq}] = &wait{deadline: now.Add(time.Duration(w.TimeoutNanos))}
	}
	t.rebuildQueue()
	t.log.Info("leading: deadlines restarted", "term", term, "sessions", len(t.sessions), "timed_waits", len(t.waits),
		"limited_holds", len(t.holds), "lock_delays", len(t.delays), "revocations", len(t.revokes))
	t.poke()
}

// Demote stops deciding: a follower forgets every deadline.
func (t *Tracker) Demote() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = false
	clear(t.sessions)
	clear(t.waits)
	clear(t.holds)
	clear(t.delays)
	clear(t.revokes)
	t.queue = nil
}

// Applied follows the state machine through what each entry's result
// reports: in its liveness, the session opened or blacklisted, the timed
// wait queued, the limited holds granted or released, the lock-delays
// started or ended, the revocations ended; in its side-effect lists, the
// waits granted or ended, the holds revoked, the holds and sessions
// ended. It
// reads nothing else, and is called in log order on the apply path. Only
// the entry that did it reports it (a retry answered from the
// exactly-once cache reports nothing); the checks for a known session or
// hold below keep a deadline from moving all the same.
func (t *Tracker) Applied(res *fsmpb.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leader {
		return
	}
	now := t.now()
	changed := false
	lv := res.GetLiveness()
	if o := lv.GetSessionOpened(); o != nil && t.sessions[o.GetSessionId()] == nil {
		ttl := time.Duration(o.GetTtlNanos())
		// The state machine applied it: the hash is well formed.
		secret, _ := fsm.ParseSecretHash(o.GetSecretHash())
		t.sessions[o.GetSessionId()] = &session{ttl: ttl, deadline: now.Add(ttl), secret: secret}
		t.queueSession(o.GetSessionId(), now.Add(ttl))
		changed = true
	}
	if id := lv.GetSessionBlacklisted(); id != 0 && t.sessions[id] != nil {
		t.sessions[id].blacklisted = true
	}
	if w := lv.GetWaitQueued(); w != nil {
		k := waitKey{w.GetLock(), w.GetSessionId(), w.GetAcquireSeq()}
		at := now.Add(time.Duration(w.GetWaitTimeoutNanos()))
		t.waits[k] = &wait{deadline: at}
		t.queueWait(k, at)
		changed = true
	}
	for _, g := range res.GetGrants() {
		delete(t.waits, waitKey{g.GetLock(), g.GetSessionId(), g.GetAcquireSeq()})
	}
	for _, h := range lv.GetLimitedHoldsGranted() {
		changed = t.limitHold(holdKey{h.GetLock(), h.GetSessionId(), h.GetToken(), ""}, h.GetOwnerKey(), time.Duration(h.GetHoldLimitNanos()), now) || changed
	}
	if h := lv.GetLimitedHoldReleased(); h != nil {
		t.holdEnded(holdKey{h.GetLock(), h.GetSessionId(), h.GetToken(), ""}, h.GetOwnerKey())
	}
	for _, e := range res.GetHoldsEnded() {
		t.holdEnded(holdKey{e.GetLock(), e.GetSessionId(), e.GetToken(), ""}, e.GetOwnerKey())
	}
	for _, r := range lv.GetRevocationsEnded() {
		delete(t.revokes, holdKey{r.GetLock(), r.GetSessionId(), r.GetToken(), r.GetOwnerKey()})
	}
	for _, r := range res.GetHoldsRevoked() {
		// A hold asked again keeps its first grace.
		k := holdKey{r.GetLock(), r.GetSessionId(), r.GetToken(), r.GetOwnerKey()}
		if _, ok := t.revokes[k]; !ok {
			at := now.Add(time.Duration(r.GetGraceNanos()))
			t.revokes[k] = &revocation{deadline: at}
			t.queueRevoke(k, at)
			changed = true
		}
	}
	if ended := res.GetSessionsEnded(); len(ended) > 0 {
		for k := range t.holds {
			if slices.Contains(ended, k.session) {
				delete(t.holds, k)
			}
		}
		for k := range t.revokes {
			if slices.Contains(ended, k.session) {
				delete(t.revokes, k)
			}
		}
	}
	for _, w := range res.GetWaitsEnded() {
		delete(t.waits, waitKey{w.GetLock(), w.GetSessionId(), w.GetAcquireSeq()})
	}
	if d := lv.GetLockDelayEnded(); d != nil {
		if cur := t.delays[d.GetLock()]; cur != nil && cur.from == d.GetDelayFrom() {
			delete(t.delays, d.GetLock())
		}
	}
	for _, d := range lv.GetLockDelaysStarted() {
		// A restart replaces the running delay: the end of the old one
		// would be refused.
		at := now.Add(time.Duration(d.GetDelayNanos()))
		t.delays[d.GetLock()] = &lockDelay{from: d.GetDelayFrom(), deadline: at}
		t.queueDelay(d.GetLock(), at)
		changed = true
	}
	for _, id := range res.GetSessionsEnded() {
		delete(t.sessions, id)
	}
	if changed {
		t.poke()
	}
}

// limitHold starts the hold limit of a hold just granted, of owner key
// ownerKey, unless it is known already; a second hold of the session
// with the token joins the first's clock. It reports whether it queued a
// deadline.
func (t *Tracker) limitHold(k holdKey, ownerKey string, limit time.Duration, now time.Time) bool {
	if h, ok := t.holds[k]; ok {
		if !slices.Contains(h.keys, ownerKey) {
			h.keys = append(h.keys, ownerKey)
			h.lengthen(limit, now)
		}
		return false
	}
	t.holds[k] = &hold{limit: limit, deadline: now.Add(limit), keys: []string{ownerKey}}
	t.queueHold(k, now.Add(limit))
	return true
}

// lengthen makes a shared clock run on the longest limit of its holds:
// a renewal names only the lock, session and token, so each renewal
// renews them all, and a holder counts on its own limit from its last
// renewal. Ending every hold at the shortest would end the others while
// their holders may still count on them; at the longest, the others come
// back later than their own limits after their holder dies, never
// earlier.
func (h *hold) lengthen(limit time.Duration, now time.Time) {
	if limit <= h.limit {
		return
	}
	h.limit = limit
	if d := now.Add(limit); d.After(h.deadline) {
		h.deadline = d // due() queues the clock again when it comes up
	}
}

// holdEnded forgets the hold of k with owner key ownerKey, and k's clock
// once none of its holds is left.
func (t *Tracker) holdEnded(k holdKey, ownerKey string) {
	h := t.holds[k]
	if h == nil {
		return
	}
	h.keys = slices.DeleteFunc(h.keys, func(key string) bool { return key == ownerKey })
	if len(h.keys) == 0 {
		delete(t.holds, k)
	}
}

// CheckHold reports whether a renewal of the hold, by a request that
// showed a secret hashing to shown, could be accepted now, without
// extending it. The server calls it before its ReadIndex round.
func (t *Tracker) CheckHold(lock string, session, token uint64, shown []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[session]; s != nil && !s.secret.Admits(shown) {
		return ErrSecretMismatch
	}
	_, err := t.lookupHold(holdKey{lock, session, token, ""})
	return err
}

// RenewHold extends a limited hold to received+limit, where received is
// the monotonic time the renewal arrived. The caller must have confirmed
// leadership (ReadIndex) after received. It returns the hold's limit.
func (t *Tracker) RenewHold(lock string, session, token uint64, received time.Time) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, err := t.lookupHold(holdKey{lock, session, token, ""})
	if err != nil {
		return 0, err
	}
	if d := received.Add(h.limit); d.After(h.deadline) {
		h.deadline = d
	}
	return h.limit, nil
}

func (t *Tracker) lookupHold(k holdKey) (*hold, error) {
	if !t.leader {
		return nil, ErrNotLeader
	}
	if h := t.holds[k]; h != nil && !h.expiring {
		return h, nil
	}
	return nil, ErrHoldLost
}

// Check reports whether a keepalive for id, by a request that showed a
// secret hashing to shown, could be accepted now, without extending
// anything. The server calls it before its ReadIndex round so a lost
// session is told at once. A session's secret never changes, so one check
// covers the Heartbeat that follows.
func (t *Tracker) Check(id uint64, shown []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id)
	if err == nil && !s.secret.Admits(shown) {
		return ErrSecretMismatch
	}
	return err
}

// Admit is Check for a keepalive that arrived at received, which it also
// counts against the session's rate: perSecond keepalives a second on
// average, as many at once (0: no bound). One over the rate gets
// ErrTooFast, before the server spends a ReadIndex round on it; it changes
// nothing, so a client that slows down is admitted again. The secret is
// checked first: a stranger's keepalives do not spend the owner's rate.
func (t *Tracker) Admit(id uint64, shown []byte, received time.Time, perSecond int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id)
	if err == nil && !s.secret.Admits(shown) {
		return ErrSecretMismatch
	}
	if err != nil || perSecond <= 0 {
		return err
	}
	interval := time.Second / time.Duration(perSecond)
	paced := s.paced
	if paced.Before(received) {
		paced = received
	}
	if paced.Sub(received) > time.Second-interval {
		return ErrTooFast
	}
	s.paced = paced.Add(interval)
	return nil
}

// Heartbeat extends session id to received+TTL, where received is the
// monotonic time the keepalive arrived. The caller must have confirmed
// leadership (ReadIndex) after received. It returns the session's TTL.
func (t *Tracker) Heartbeat(id uint64, received time.Time) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(id)
	if err != nil {
		return 0, err
	}
	if d := received.Add(s.ttl); d.After(s.deadline) {
		s.deadline = d
	}
	return s.ttl, nil
}

func (t *Tracker) lookup(id uint64) (*session, error) {
	if !t.leader {
		return nil, ErrNotLeader
	}
	s := t.sessions[id]
	switch {
	case s == nil || s.expiring:
		return nil, ErrSessionLost
	case s.blacklisted:
		return nil, ErrBlacklisted
	}
	return s, nil
}

// Remaining is how long session id has left on the leader's clock.
func (t *Tracker) Remaining(id uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[id]
	if s == nil || !t.leader {
		return 0, false
	}
	return s.deadline.Sub(t.now()), true
}

func (t *Tracker) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run proposes expiries and wait timeouts until ctx ends, then waits for
// the proposals it started.
func (t *Tracker) Run(ctx context.Context) {
	defer t.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := t.fire(ctx)
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(next.Sub(t.now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-t.wake:
		}
	}
}

// FireDue is one turn of Run for a manual tracker (NewManual): it re-arms
// the retries that are due, proposes every passed deadline through the
// Proposer, in the caller's goroutine, and returns the next time it has
// something to do (zero if nothing).
func (t *Tracker) FireDue(ctx context.Context) time.Time {
	t.mu.Lock()
	now := t.now()
	kept := t.retries[:0]
	for _, r := range t.retries {
		if now.Before(r.at) {
			kept = append(kept, r)
			continue
		}
		if t.leader && t.term == r.term {
			r.rearm()
		}
	}
	t.retries = kept
	t.mu.Unlock()
	next := t.fire(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.retries {
		if next.IsZero() || r.at.Before(next) {
			next = r.at
		}
	}
	return next
}

// job is one proposal fire decided to make.
type job struct {
	term    uint64
	session uint64  // ExpireSession unless cancel or expire
	wait    waitKey // CancelWait when cancel
	cancel  bool
	hold    holdKey  // ExpireHold when expire
	keys    []string // when expire: the holds' owner keys, one ExpireHold each
	expire  bool
	delay   string // EndLockDelay of from on this lock when end
	from    uint64
	end     bool
	revoke  bool // EndRevokedHold of hold when set
}

// fire starts a proposal for every passed deadline and returns the next
// deadline (zero if none). Decisions are made in id and key order, so a
// manual tracker proposes deterministically.
func (t *Tracker) fire(ctx context.Context) time.Time {
	jobs, next := t.due()
	for _, j := range jobs {
		if t.manual {
			t.done(j, t.propose(ctx, j))
			continue
		}
		t.wg.Go(func() { t.done(j, t.propose(ctx, j)) })
	}
	return next
}

func (t *Tracker) due() ([]job, time.Time) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.leader {
		return nil, time.Time{}
	}
	var next time.Time
	later := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	var jobs []job
	for len(t.queue) > 0 && !now.Before(t.queue[0].at) {
		d := heap.Pop(&t.queue).(deadline)
		if d.isDelay {
			ld := t.delays[d.lock]
			switch {
			case ld == nil || ld.ending:
				// Ended, or being ended (a failed end re-queues).
			case now.Before(ld.deadline):
				t.queueDelay(d.lock, ld.deadline) // a restart moved it
			default:
				ld.ending = true
				jobs = append(jobs, job{term: t.term, delay: d.lock, from: ld.from, end: true})
			}
			continue
		}
		if d.isRevoke {
			r := t.revokes[d.hold]
			switch {
			case r == nil || r.ending:
				// Ended, or being ended (a failed end re-queues).
			default:
				r.ending = true
				jobs = append(jobs, job{term: t.term, hold: d.hold, revoke: true})
			}
			continue
		}
		if d.isHold {
			h := t.holds[d.hold]
			switch {
			case h == nil || h.expiring:
				// Ended, or being expired (a failed expiry re-queues).
			case now.Before(h.deadline):
				t.queueHold(d.hold, h.deadline) // a renewal moved it
			default:
				h.expiring = true
				jobs = append(jobs, job{term: t.term, hold: d.hold, keys: slices.Clone(h.keys), expire: true})
			}
			continue
		}
		if d.wait {
			w := t.waits[d.key]
			switch {
			case w == nil || w.cancelling:
				// Ended, or being cancelled (a failed cancel re-queues).
			case now.Before(w.deadline):
				t.queueWait(d.key, w.deadline)
			default:
				w.cancelling = true
				jobs = append(jobs, job{term: t.term, wait: d.key, cancel: true})
			}
			continue
		}
		s := t.sessions[d.session]
		switch {
		case s == nil || s.expiring:
			// Ended, or being expired (a failed expiry re-queues).
		case now.Before(s.deadline):
			t.queueSession(d.session, s.deadline) // a heartbeat moved it
		default:
			s.expiring = true
			jobs = append(jobs, job{term: t.term, session: d.session})
		}
	}
	if len(t.queue) > 0 {
		later(t.queue[0].at)
	}
	return jobs, next
}

func (t *Tracker) propose(ctx context.Context, j job) error {
	if j.end {
		return t.p.EndLockDelay(ctx, j.delay, j.from)
	}
	if j.revoke {
		return t.p.EndRevokedHold(ctx, j.hold.lock, j.hold.session, j.hold.token)
	}
	if j.expire {
		// Every hold on this clock, in the order granted; a failure
		// re-arms the clock for those left (the ended ones are gone
		// from it by then).
		var first error
		for _, key := range j.keys {
			if err := t.p.ExpireHold(ctx, j.hold.lock, j.hold.session, j.hold.token, key); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if j.cancel {
		return t.p.CancelWait(ctx, j.wait.lock, j.wait.session, j.wait.seq)
	}
	return t.p.ExpireSession(ctx, j.session)
}

// done re-arms a failed decision after RetryDelay if this node still
// leads in the same term (a new term re-derives everything in Promote).
func (t *Tracker) done(j job, err error) {
	if err == nil {
		return
	}
	var rearm func()
	if j.end {
		lock, from := j.delay, j.from
		t.log.Warn("end lock-delay", "lock", lock, "index", from, "err", err)
		rearm = func() {
			if ld := t.delays[lock]; ld != nil && ld.from == from {
				ld.ending = false
				t.queueDelay(lock, t.now())
			}
		}
	} else if j.revoke {
		k := j.hold
		t.log.Warn("end revoked hold", "lock", k.lock, "session", k.session, "token", k.token, "err", err)
		rearm = func() {
			if r := t.revokes[k]; r != nil {
				r.ending = false
				t.queueRevoke(k, t.now())
			}
		}
	} else if j.expire {
		k := j.hold
		t.log.Warn("expire hold", "lock", k.lock, "session", k.session, "token", k.token, "err", err)
		rearm = func() {
			if h := t.holds[k]; h != nil {
				h.expiring = false
				t.queueHold(k, t.now())
			}
		}
	} else if j.cancel {
		k := j.wait
		t.log.Warn("cancel wait", "lock", k.lock, "session", k.session, "err", err)
		rearm = func() {
			if w := t.waits[k]; w != nil {
				w.cancelling = false
				t.queueWait(k, t.now())
			}
		}
	} else {
		id := j.session
		t.log.Warn("expire session", "session", id, "err", err)
		rearm = func() {
			if s := t.sessions[id]; s != nil {
				s.expiring = false
				t.queueSession(id, t.now())
			}
		}
	}
	if t.manual {
		t.mu.Lock()
		t.retries = append(t.retries, retryAt{at: t.now().Add(RetryDelay), rearm: rearm, term: j.term})
		t.mu.Unlock()
		return
	}
	time.AfterFunc(RetryDelay, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.leader && t.term == j.term {
			rearm()
			t.poke()
		}
	})
}
