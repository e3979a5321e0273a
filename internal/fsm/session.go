package fsm

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// session is one client session and its indexes.
type session struct {
	id          uint64
	owner       string
	ttl         int64 // nanoseconds
	blacklisted bool
	created     int64 // wall clock, display only

	// minUnacked and results are the exactly-once window: results holds the
	// results of seqs >= minUnacked, ascending by seq, at most MaxPending.
	minUnacked uint64
	results    []cachedResult

	// holds counts this session's holder records per lock name, and
	// numHolds is their sum; waits is the set of its queued waiters. They
	// let the session end in O(its holds and waits).
	holds    map[string]uint32
	numHolds int
	waits    map[waitKey]struct{}
}

type cachedResult struct {
	seq uint64
	res *fsmpb.Result
	// claimed: a retry of this Acquire was answered from res (or the
	// session's own CancelWait of it with its grant), so the client may act
	// on that answer; an abandoned CancelWait no longer undoes the acquire.
	claimed bool
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
	return &session{
		id:      id,
		owner:   owner,
		ttl:     ttl,
		created: created,
		holds:   make(map[string]uint32),
		waits:   make(map[waitKey]struct{}),
	}
}

// cached returns the cached result of seq, or nil.
func (s *session) cached(seq uint64) *fsmpb.Result {
	if c := s.cachedEntry(seq); c != nil {
		return c.res
	}
	return nil
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

// remember caches res as the result of seq, which is not cached yet.
func (s *session) remember(seq uint64, res *fsmpb.Result) {
	i := s.firstAtOrAbove(seq)
	s.results = slices.Insert(s.results, i, cachedResult{seq: seq, res: res})
}

// granted updates the cached result of the queued acquire seq, if it is
// still cached, to say that it now holds lock with token.
func (s *session) granted(seq uint64, lock string, token uint64) {
	r := s.cached(seq)
	if r == nil || r.GetAcquire().GetLock() != lock || r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		return
	}
	r.Acquire = &fsmpb.AcquireOutcome{
		Lock:   lock,
		Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED,
		Token:  token,
		Count:  1,
	}
}

// holdEnded updates the cached result of the acquire seq, if it is still
// cached as granted, to say that the hold it got has ended: a retry of a
// request whose answer never arrived must not learn "granted" for a hold
// that is gone (e.g. a server released it for a caller that went away).
func (s *session) holdEnded(seq uint64, lock string) {
	r := s.cached(seq)
	if r == nil || r.GetAcquire().GetLock() != lock || r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
		return
	}
	r.Error = fsmpb.Error_ERROR_NOT_HOLDER
	r.Message = "the hold this request got on lock " + quote(lock) + " has since ended"
	r.Acquire = nil
}

// abandoned updates the cached result of the acquire seq, whose hold an
// abandoned CancelWait released, to say that its caller went away.
func (s *session) abandoned(seq uint64, lock string) {
	r := s.cached(seq)
	if r == nil {
		return
	}
	r.Error = fsmpb.Error_ERROR_WAIT_CANCELLED
	r.Message = "wait for lock " + quote(lock) + " was cancelled: its caller went away, and the grant it got was released"
	r.Acquire = nil
}

// waitEnded updates the cached result of the queued acquire seq, if it is
// still cached, to the final refusal code.
func (s *session) waitEnded(seq uint64, lock string, code fsmpb.Error) {
	r := s.cached(seq)
	if r == nil || r.GetAcquire().GetLock() != lock || r.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		return
	}
	r.Error = code
	r.Message = waitEndedMessage(lock, code)
	r.Acquire = nil
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

func (s *session) addHold(lock string) {
	s.holds[lock]++
	s.numHolds++
}

func (s *session) dropHold(lock string) {
	if s.holds[lock] <= 1 {
		delete(s.holds, lock)
	} else {
		s.holds[lock]--
	}
	s.numHolds--
}

// load is what MaxHoldsPerSession bounds.
func (s *session) load() int { return s.numHolds + len(s.waits) }

func (m *Machine) openSession(a *apply, op *fsmpb.OpenSession) {
	ttl := time.Duration(op.GetTtlNanos())
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if err := checkTTL(ttl); err != nil {
		a.refuse(err)
		return
	}
	if err := checkLabel("owner", op.GetOwner()); err != nil {
		a.refuse(err)
		return
	}
	s := newSession(a.index, op.GetOwner(), int64(ttl), a.wall)
	m.sessions[s.id] = s
	m.sessionIDs.ReplaceOrInsert(s.id)
	a.res.SessionId = s.id
}

func (m *Machine) closeSession(a *apply, s *session) {
	if !a.needSession(s, "close_session") {
		return
	}
	m.endSession(a, s)
}

func (m *Machine) expireSession(a *apply, op *fsmpb.ExpireSession) {
	s := m.sessions[op.GetSessionId()]
	if s == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", op.GetSessionId()))
		return
	}
	m.endSession(a, s)
}

func (m *Machine) blacklistSession(a *apply, op *fsmpb.BlacklistSession) {
	s := m.sessions[op.GetSessionId()]
	if s == nil {
		a.refuse(errorf(fsmpb.Error_ERROR_SESSION_NOT_FOUND, "session %d not found", op.GetSessionId()))
		return
	}
	s.blacklisted = true
	m.dropWaits(a, s, fsmpb.Error_ERROR_BLACKLISTED)
}

// endSession removes s in one step: its waiters leave their queues (waits
// ended with SESSION_NOT_FOUND), then its holds end and each lock goes to
// the next waiter with this entry's index as token.
func (m *Machine) endSession(a *apply, s *session) {
	m.dropWaits(a, s, fsmpb.Error_ERROR_SESSION_NOT_FOUND)
	names := make([]string, 0, len(s.holds))
	for name := range s.holds {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		l := m.locks[name]
		l.holders = slices.DeleteFunc(l.holders, func(h *fsmpb.Holder) bool {
			return h.GetSessionId() == s.id
		})
		m.settle(a, l)
	}
	delete(m.sessions, s.id)
	m.sessionIDs.Delete(s.id)
	a.res.SessionsEnded = append(a.res.SessionsEnded, s.id)
}

// dropWaits removes every waiter of s, in (lock, seq) order, reporting each
// in waits_ended with code, and gives each lock that became free to its next
// waiter.
func (m *Machine) dropWaits(a *apply, s *session, code fsmpb.Error) {
	if len(s.waits) == 0 {
		return
	}
	keys := make([]waitKey, 0, len(s.waits))
	for k := range s.waits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareWaitKeys)
	for i, k := range keys {
		l := m.locks[k.lock]
		l.removeWaiter(s.id, k.seq)
		delete(s.waits, k)
		s.waitEnded(k.seq, k.lock, code)
		a.res.WaitsEnded = append(a.res.WaitsEnded, &fsmpb.WaitEnded{
			SessionId:  s.id,
			AcquireSeq: k.seq,
			Lock:       k.lock,
			Error:      code,
		})
		if i+1 == len(keys) || keys[i+1].lock != k.lock {
			m.settle(a, l)
		}
	}
}
