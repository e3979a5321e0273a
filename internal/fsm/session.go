package fsm

import (
	"cmp"
	"crypto/subtle"
	"slices"
	"sort"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// session is one client session: what it was opened with, which never
// changes, and a handle on its current sessionState, which Apply changes
// in place unless a frozen state shares it; then its first change copies
// it (changeSession, in frozen.go). Holders and waiters point at the
// session, and an encoder of a frozen state reads their id and owner
// through it.
type session struct {
	id      uint64
	owner   string
	ttl     int64  // nanoseconds
	created int64  // wall clock, display only
	nonce   uint64 // the OpenSession's nonce (exactly-once opens), 0 if none
	// secretHash is the SHA-256 of the session's secret; all zero for a
	// session without one (opened before log version 3).
	secretHash SecretHash
	// principal is the user that opened it; with authentication on, only
	// that user may act for it. Empty: opened while authentication was off.
	principal string

	*sessionState
	// epoch is the Machine's freeze epoch when sessionState was made.
	epoch uint64

	// held has the lock of each of this session's holder records (a lock
	// twice if held under two owner keys), in no order; each holder knows
	// its position (holder.idx), so a hold is added and dropped in O(1).
	// waits is the set of its queued waiters, nil while there is none.
	// They let the session end in O(its holds and waits). (held is a slice,
	// not a map of lock names, because at a few holds per session a map
	// costs several times the bytes.) Snapshots show neither (the holds
	// and waiters are in their locks; the number of holds is in the
	// state), so they are not in the state a frozen state may share, and a
	// session holding many locks is not copied with them.
	held  []*lock
	waits map[waitKey]waitEntry // each queued wait's owner key
	// keyWaits has each owner key's waits, in no order, while the session
	// has manyWaits waits or more (built by the add that reaches it,
	// dropped with the last wait or when all end: dropWaits), so that
	// the deadlock search picks a
	// node's own waits out of a session with many without reading them
	// all (ownWaits): a session may have MaxHoldsPerSession.
	keyWaits map[string][]waitKey
}

// waitEntry is a session's index entry for one wait: its owner key, and
// while the session keeps keyWaits, its place in keyWaits[key].
type waitEntry struct {
	key string
	at  int32
}

// sessionState is what of a session changes and snapshots show, as the
// Machine or a frozen state sees it: once a frozen state shares it, it
// never changes.
type sessionState struct {
	sess        *session // whose state it is
	holds       uint32   // len(sess.held), at most MaxHoldsPerSession
	blacklisted bool

	// minUnacked and results are the exactly-once window: results holds the
	// results of seqs >= minUnacked, ascending by seq, at most MaxPending.
	minUnacked uint64
	results    []cachedResult
}

// SecretHashLen is the length of a session secret's hash (SHA-256).
const SecretHashLen = 32

// SecretHash is the SHA-256 of a session's secret, as the state keeps it;
// the zero value stands for a session without a secret (opened before
// log version 3).
type SecretHash [SecretHashLen]byte

// ParseSecretHash reads a hash field: empty is none; anything else must be
// SecretHashLen bytes, not all zero.
func ParseSecretHash(b []byte) (SecretHash, bool) {
	if len(b) == 0 {
		return SecretHash{}, true
	}
	if len(b) != SecretHashLen || SecretHash(b) == (SecretHash{}) {
		return SecretHash{}, false
	}
	return SecretHash(b), true
}

// IsSet reports whether h is a secret's hash (not the zero value).
func (h SecretHash) IsSet() bool { return h != SecretHash{} }

// Bytes is h as a field value: nil for no secret.
func (h *SecretHash) Bytes() []byte {
	if !h.IsSet() {
		return nil
	}
	return h[:]
}

// Admits reports whether a request that showed a secret hashing to shown
// may act for the session: any request for a session without a secret,
// else one with its hash, compared in constant time.
func (h *SecretHash) Admits(shown []byte) bool {
	return !h.IsSet() || subtle.ConstantTimeCompare(h[:], shown) == 1
}

func (s *session) setSecretHash(b []byte) bool {
	h, ok := ParseSecretHash(b)
	s.secretHash = h
	return ok
}

func (s *session) secretHashBytes() []byte { return s.secretHash.Bytes() }

// cachedResult is the exactly-once cache's copy of the result of seq: the
// fields of fsmpb.Result that the cache keeps (never the side-effect lists,
// which concern other requests, nor session_id, which only OpenSession sets
// and which is not deduplicated). It is a plain Go record rather than a
// cloned message, sharing the strings of the answer it copies, because
// every session keeps its unacknowledged results; toProto rebuilds the
// message for a retry or a snapshot.
type cachedResult struct {
	seq       uint64
	msg       string    // Result.message, unless endedLock is set
	endedLock string    // the hold this acquire got on it has ended (holdEnded)
	acquire   *outcome  // Result.acquire, nil if unset
	many      []outcome // Result.acquire_many
	code      fsmpb.Error
	remaining uint32 // Result.remaining_count
	// deadlock is Result.deadlock's edges, nil for all but a DEADLOCK
	// refusal (a pointer: the cache keeps many results, few of them one).
	deadlock *[]deadlockEdge
	// claimed: a retry of this Acquire was answered from it (or the
	// session's own CancelWait of it with its grant), so the client may act
	// on that answer; an abandoned CancelWait no longer undoes the acquire.
	claimed bool
	// keyed: ownerKey is the owner key the Acquire or AcquireMany asked
	// with (cached from SameTokenHoldsVersion on): holdEnded rewrites the
	// result only for a hold of that key.
	keyed    bool
	ownerKey string
}

// outcome is a cached fsmpb.AcquireOutcome.
type outcome struct {
	lock     string
	token    uint64
	holder   *holderCopy // BUSY / QUEUED: the holder at the time, nil if unset
	status   fsmpb.AcquireStatus
	count    uint32
	position uint32
	delayed  int64 // BUSY / QUEUED: the end of the lock's lock-delay, for people
}

// holderCopy is a cached fsmpb.Holder: what a BUSY or QUEUED answer said
// about the holder then, kept apart from the live holder record (which
// changes, and whose session may end).
type holderCopy struct {
	sessionID  uint64
	ownerKey   string
	owner      string
	token      uint64
	since      int64
	acquireSeq uint64
	count      uint32
	shared     bool
	holdLimit  int64
	lockDelay  int64
	value      string
}

// acquireIs reports whether the cached result is an Acquire's outcome for
// lock with status st.
func (c *cachedResult) acquireIs(lock string, st fsmpb.AcquireStatus) bool {
	return c.acquire != nil && c.acquire.lock == lock && c.acquire.status == st
}

// waitKey names one waiter of a session: lock name and acquire seq.
type waitKey struct {
	lock string
	seq  uint64
}

func compareWaitKeys(x, y waitKey) int {
	if c := cmp.Compare(x.lock, y.lock); c != 0 {
		return c
	}
	return cmp.Compare(x.seq, y.seq)
}

func newSession(id uint64, owner string, ttl, created int64) *session {
	s := &session{
		id:           id,
		owner:        owner,
		ttl:          ttl,
		created:      created,
		sessionState: &sessionState{},
	}
	s.sess = s
	return s
}

// cachedEntry returns the cache entry of seq, or nil. The pointer is valid
// until results next changes.
func (s *session) cachedEntry(seq uint64) *cachedResult {
	i, ok := slices.BinarySearchFunc(s.results, seq, func(c cachedResult, seq uint64) int {
		return cmp.Compare(c.seq, seq)
	})
	if !ok {
		return nil
	}
	return &s.results[i]
}

// firstAtOrAbove returns the position of the first cached result with seq
// >= min.
func (s *session) firstAtOrAbove(min uint64) int {
	return sort.Search(len(s.results), func(i int) bool { return s.results[i].seq >= min })
}

// pendingFrom returns how many cached results would remain once min_unacked
// is raised to min.
func (s *session) pendingFrom(min uint64) int {
	return len(s.results) - s.firstAtOrAbove(min)
}

// forgetBelow raises min_unacked to min and drops the results below it.
func (s *session) forgetBelow(min uint64) {
	if min <= s.minUnacked {
		return
	}
	s.minUnacked = min
	if n := s.firstAtOrAbove(min); n > 0 {
		s.results = slices.Delete(s.results, 0, n)
	}
}

// remember caches res as the result of seq, which is not cached yet;
// keyed, with the owner key its acquire asked with.
func (s *session) remember(seq uint64, res *fsmpb.Result, keyed bool, ownerKey string) {
	i := s.firstAtOrAbove(seq)
	c := cacheResult(seq, res)
	c.keyed, c.ownerKey = keyed, ownerKey
	s.results = slices.Insert(s.results, i, c)
}

// granted updates the cached result of the queued acquire seq, if it is
// still cached, to say that it now holds lock with token.
func (s *session) granted(seq uint64, lock string, token uint64, count uint32) {
	c := s.cachedEntry(seq)
	if c == nil || !c.acquireIs(lock, fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED) {
		return
	}
	// The outcome belongs to this entry alone: overwrite it in place.
	*c.acquire = outcome{
		lock:   lock,
		status: fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED,
		token:  token,
		count:  count,
	}
}

// holdEnded updates the cached results that granted the hold of lock
// with token, those still cached, to say that the hold has ended: a retry
// of a request whose answer never arrived must not learn "granted" for a
// hold that is gone (e.g. a server released it for a caller that went
// away, or an operator's CasRelease ended it). That is the acquire that
// made the hold and any reentrant acquire of it since; an AcquireMany's
// outcome for the lock becomes BUSY without a holder (the lock is not the
// caller's; its other outcomes stand, so that the caller learns the holds
// it still has). A session keeps few results (those not yet
// acknowledged, MaxPending at most), so the scan is short. It is the whole
// cache, not the results from the hold's acquireSeq on: requests retried
// after a lost connection can apply out of seq order, so a reentrant
// acquire's seq may be below the one that made the hold.
//
// One session's holds of a lock under two owner keys granted by one
// entry share the token: a result cached with its owner key (keyed, from
// SameTokenHoldsVersion) is rewritten only when the ended hold has that
// key; one cached below it by lock and token alone, as before.
func (s *session) holdEnded(lock string, token uint64, ownerKey string) {
	for i := range s.results {
		c := &s.results[i]
		if c.keyed && c.ownerKey != ownerKey {
			continue
		}
		if c.acquireIs(lock, fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED) && c.acquire.token == token {
			c.code = fsmpb.Error_ERROR_NOT_HOLDER
			// The message is made when it is read, which is rare: every
			// release comes here while its acquire's answer is still
			// cached, and the answer is mostly forgotten right after.
			c.msg, c.endedLock = "", lock
			c.acquire = nil
			continue
		}
		for j := range c.many {
			if o := &c.many[j]; o.lock == lock && o.token == token && o.status == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
				*o = outcome{lock: lock, status: fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY}
			}
		}
	}
}

// cycle is the cached Result.deadlock's edges.
func (c *cachedResult) cycle() []deadlockEdge {
	if c.deadlock == nil {
		return nil
	}
	return *c.deadlock
}

// message is the cached result's error message.
func (c *cachedResult) message() string {
	if c.endedLock != "" {
		return "the hold this request got on lock " + quote(c.endedLock) + " has since ended"
	}
	return c.msg
}

// abandoned updates the cached result of the acquire seq, whose hold an
// abandoned CancelWait released, to say that its caller went away.
func (s *session) abandoned(seq uint64, lock string) {
	c := s.cachedEntry(seq)
	if c == nil {
		return
	}
	c.code, c.endedLock = fsmpb.Error_ERROR_WAIT_CANCELLED, ""
	c.msg = "wait for lock " + quote(lock) + " was cancelled: its caller went away, and the grant it got was released"
	c.acquire = nil
}

// waitEnded updates the cached result of the queued acquire seq, if it is
// still cached, to the final refusal code.
func (s *session) waitEnded(seq uint64, lock string, code fsmpb.Error) {
	c := s.cachedEntry(seq)
	if c == nil || !c.acquireIs(lock, fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED) {
		return
	}
	c.code = code
	c.msg, c.endedLock = waitEndedMessage(lock, code), ""
	c.acquire = nil
}

func waitEndedMessage(lock string, code fsmpb.Error) string {
	switch code {
	case fsmpb.Error_ERROR_WAIT_CANCELLED:
		return "wait for lock " + quote(lock) + " was cancelled"
	case fsmpb.Error_ERROR_WAIT_TIMED_OUT:
		return "wait for lock " + quote(lock) + " timed out"
	case fsmpb.Error_ERROR_BLACKLISTED:
		return "wait for lock " + quote(lock) + " ended: the session was blacklisted"
	}
	return "wait for lock " + quote(lock) + " ended: the session ended"
}

// addHold records a new holder record of s on l and returns its position
// in s.held, which the record keeps as holder.idx.
func (s *session) addHold(l *lock) int32 {
	s.held = append(s.held, l)
	s.holds++
	return int32(len(s.held) - 1)
}

// dropHold forgets position i of s.held, whose holder record has left its
// lock: the last position moves into its place, and the record that points
// to it is told. s has been through changeSession.
func (m *Machine) dropHold(s *session, i int32) {
	last := int32(len(s.held) - 1)
	if i != last {
		moved := s.held[last]
		s.held[i] = moved
		// idx is not encoded, but it shares its record with fields that
		// are: the record goes through changeLock like any other change.
		m.changeLock(moved)
		for k := range moved.holders {
			if h := &moved.holders[k]; h.s == s && h.idx == last {
				h.idx = i
				break
			}
		}
	}
	s.held[last] = nil
	s.held = s.held[:last]
	s.holds--
	// Give back most of the array of a session that let go of many locks.
	if c := cap(s.held); c > 64 && len(s.held) < c/4 {
		s.held = append(make([]*lock, 0, 2*len(s.held)), s.held...)
	}
}

// numHolds is the number of holder records of s.
func (s *sessionState) numHolds() int { return int(s.holds) }

// addWait and dropWait keep s.waits, which is nil while empty (most
// sessions never wait, and an empty map still costs its header).
func (s *session) addWait(k waitKey, ownerKey string) {
	if s.waits == nil {
		s.waits = make(map[waitKey]waitEntry)
	}
	e := waitEntry{key: ownerKey}
	if s.keyWaits != nil {
		e.at = int32(len(s.keyWaits[ownerKey]))
		s.keyWaits[ownerKey] = append(s.keyWaits[ownerKey], k)
	}
	s.waits[k] = e
	if s.keyWaits == nil && len(s.waits) >= manyWaits {
		s.keyWaits = make(map[string][]waitKey)
		for k, e := range s.waits {
			e.at = int32(len(s.keyWaits[e.key]))
			s.keyWaits[e.key] = append(s.keyWaits[e.key], k)
			s.waits[k] = e
		}
	}
}

func (s *session) dropWait(k waitKey) {
	if s.keyWaits == nil {
		delete(s.waits, k)
		if len(s.waits) == 0 {
			s.waits = nil
		}
		return
	}
	e, ok := s.waits[k]
	if !ok {
		return
	}
	delete(s.waits, k)
	if len(s.waits) == 0 {
		s.waits, s.keyWaits = nil, nil
		return
	}
	// Swap the key's last wait into k's place.
	ks := s.keyWaits[e.key]
	last := ks[len(ks)-1]
	if last != k {
		ks[e.at] = last
		le := s.waits[last]
		le.at = e.at
		s.waits[last] = le
	}
	if ks = ks[:len(ks)-1]; len(ks) == 0 {
		delete(s.keyWaits, e.key)
	} else {
		s.keyWaits[e.key] = ks
	}
}

// load is what MaxHoldsPerSession bounds.
func (s *session) load() int { return s.numHolds() + len(s.waits) }

// opened is an OpenSession's result with room for what it reports to the
// tracker (liveness.session_opened), so that an open stays one allocation.
type opened struct {
	res    fsmpb.Result
	lv     fsmpb.Liveness
	report fsmpb.SessionOpened
	hash   SecretHash // report's secret_hash: the result's own copy
}

func (m *Machine) openSession(a *apply, r *opened, op *fsmpb.OpenSession, principal string) {
	ttl := op.GetTtlNanos()
	if ttl == 0 {
		ttl = int64(rules.DefaultTTL)
	}
	if err := checkTTL(ttl); err != nil {
		a.refuse(err)
		return
	}
	if err := checkOwner(op.GetOwner()); err != nil {
		a.refuse(err)
		return
	}
	probe := session{}
	if !probe.setSecretHash(op.GetSecretHash()) {
		a.refuse(invalid("secret_hash is %d bytes; a SHA-256 (%d bytes, not all zero) or nothing", len(op.GetSecretHash()), SecretHashLen))
		return
	}
	if s := m.retriedOpen(op, principal); s != nil {
		// A retry of the open that made s, whose answer was lost (the
		// client counts s's deadline from its first attempt). One that
		// an operator blacklisted meanwhile is refused.
		if s.blacklisted {
			a.refuse(errorf(fsmpb.Error_ERROR_BLACKLISTED, "session %d, which this open made, is blacklisted", s.id))
			return
		}
		a.res.SessionId = s.id
		return
	}
	s := newSession(a.index, op.GetOwner(), ttl, a.wall)
	s.secretHash, s.principal = probe.secretHash, principal
	m.created(s)
	m.addSession(s)
	m.noteNonce(s, op.GetNonce())
	a.res.SessionId = s.id
	r.hash = s.secretHash
	r.report = fsmpb.SessionOpened{SessionId: s.id, TtlNanos: s.ttl, SecretHash: r.hash.Bytes()}
	r.lv.SessionOpened = &r.report
	a.res.Liveness = &r.lv
}

// addSession and dropSession add and remove a live session in the
// indexes every session is in: by id, in id order, and by principal.
func (m *Machine) addSession(s *session) {
	m.sessions[s.id] = s
	m.sessionTree.ReplaceOrInsert(s.sessionState)
	if s.principal != "" {
		if m.byPrincipal == nil {
			m.byPrincipal = make(map[string]int)
		}
		m.byPrincipal[s.principal]++
	}
}

func (m *Machine) dropSession(s *session) {
	delete(m.sessions, s.id)
	m.sessionTree.Delete(s.sessionState)
	if s.principal != "" {
		if m.byPrincipal[s.principal]--; m.byPrincipal[s.principal] == 0 {
			delete(m.byPrincipal, s.principal)
		}
	}
}

// retriedOpen is the live session that op, by principal, retries the
// open of (the same nonce, owner, TTL, secret and user), or nil if op
// opens a new one.
func (m *Machine) retriedOpen(op *fsmpb.OpenSession, principal string) *session {
	ttl := op.GetTtlNanos()
	if ttl == 0 {
		ttl = int64(rules.DefaultTTL)
	}
	nonce := op.GetNonce()
	s := m.opens[nonce]
	if nonce == 0 || s == nil || s.owner != op.GetOwner() || s.ttl != ttl || s.principal != principal {
		return nil
	}
	if h, ok := ParseSecretHash(op.GetSecretHash()); !ok || h != s.secretHash {
		return nil
	}
	return s
}

// noteNonce records that s was opened with nonce and reports true, unless
// a live session holds that nonce already (another owner or TTL under a
// nonce in use): then s keeps none, so that at most one live session has
// a nonce and a snapshot rebuilds the index exactly.
func (m *Machine) noteNonce(s *session, nonce uint64) bool {
	if nonce == 0 {
		return true
	}
	if _, used := m.opens[nonce]; used {
		return false
	}
	if m.opens == nil {
		m.opens = make(map[uint64]*session)
	}
	s.nonce = nonce
	m.opens[nonce] = s
	return true
}

func (m *Machine) closeSession(a *apply, s *session) {
	if !a.needSession(s, "close_session") {
		return
	}
	m.endSession(a, s, EndSessionClosed)
}

func (m *Machine) expireSession(a *apply, op *fsmpb.ExpireSession) {
	s := m.sessions[op.GetSessionId()]
	if s == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", op.GetSessionId()))
		return
	}
	m.endSession(a, s, EndSessionExpired)
}

func (m *Machine) blacklistSession(a *apply, op *fsmpb.BlacklistSession) {
	s := m.sessions[op.GetSessionId()]
	if s == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", op.GetSessionId()))
		return
	}
	m.changeSession(s)
	s.blacklisted = true
	a.liveness().SessionBlacklisted = s.id
	m.dropWaits(a, s, fsmpb.Error_ERROR_BLACKLISTED, false)
}

// endSession removes s in one step: its waiters leave their queues (waits
// ended with SESSION_NOT_FOUND), then its holds end and each lock goes to
// the next waiter with this entry's index as token, after the longest
// lock-delay of the session's holds of it if s expired (delay.go).
func (m *Machine) endSession(a *apply, s *session, how HoldEnd) {
	m.dropWaits(a, s, fsmpb.Error_ERROR_SESSION_NOT_FOUND, m.logVersion >= EndHoldsFirstVersion)
	held := slices.Clone(s.held)
	slices.SortFunc(held, func(x, y *lock) int { return cmp.Compare(x.name, y.name) })
	held = slices.Compact(held) // a lock held under two owner keys
	for _, l := range held {
		m.changeLock(l)
		var delay uint8
		for i := range l.holders {
			if h := &l.holders[i]; h.s == s {
				m.recordEnd(a, l, h, how)
				delay = max(delay, h.lockDelay)
			}
		}
		l.holders = slices.DeleteFunc(l.holders, func(h holder) bool { return h.s == s })
		l.dropRevocationsOf(s)
		l.dropValuesOf(s)
		if delay != 0 && how.delays() {
			m.startDelay(a, l, delay)
		}
		m.grantWaiters(a, l)
	}
	m.dropSession(s)
	if s.nonce != 0 && m.opens[s.nonce] == s {
		delete(m.opens, s.nonce)
	}
	a.res.SessionsEnded = append(a.res.SessionsEnded, s.id)
}

// dropWaits removes every waiter of s, in (lock, seq) order, reporting each
// in waits_ended with code, and gives each lock that became free to its next
// waiter; with holdsEnd, not the locks s holds: the caller ends those holds
// next and grants their locks after, once their lock-delays have started,
// so that no waiter is granted beside a hold whose lock-delay starts in
// the same entry.
func (m *Machine) dropWaits(a *apply, s *session, code fsmpb.Error, holdsEnd bool) {
	if len(s.waits) == 0 {
		return
	}
	keys := make([]waitKey, 0, len(s.waits))
	for k := range s.waits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareWaitKeys)
	// Every wait goes: no index by owner key to keep on the way (a search
	// that a grant below runs picks s's waits out of s.waits instead).
	s.keyWaits = nil
	held := func(l *lock) bool { return slices.Contains(s.held, l) }
	if holdsEnd && len(s.held) > 16 {
		// A session with many holds and waits: one set, not a scan of
		// its holds for each lock it waits for.
		set := make(map[*lock]struct{}, len(s.held))
		for _, l := range s.held {
			set[l] = struct{}{}
		}
		held = func(l *lock) bool { _, ok := set[l]; return ok }
	}
	var seqs []uint64
	for i := 0; i < len(keys); {
		// The waits of one lock leave its queue together.
		j := i + 1
		for j < len(keys) && keys[j].lock == keys[i].lock {
			j++
		}
		l := m.locks[keys[i].lock]
		m.changeLock(l)
		seqs = seqs[:0]
		for _, k := range keys[i:j] {
			seqs = append(seqs, k.seq)
		}
		l.removeWaiters(s, seqs)
		for _, k := range keys[i:j] {
			s.dropWait(k)
			m.changeSession(s)
			s.waitEnded(k.seq, k.lock, code)
			a.res.WaitsEnded = append(a.res.WaitsEnded, &fsmpb.WaitEnded{
				SessionId:  s.id,
				AcquireSeq: k.seq,
				Lock:       k.lock,
				Error:      code,
			})
		}
		if !(holdsEnd && held(l)) {
			m.grantWaiters(a, l)
		}
		i = j
	}
}
