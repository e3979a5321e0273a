package fsm

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestRandomStream applies seeded random command streams and checks, after
// every entry, the invariants of DESIGN.md §5 against a small model built
// only from the results:
//   - at most limit holders per lock (one for the mutexes, three for the
//     semaphore "sem", four readers or one writer for "rw"), never an
//     exclusive hold beside another, and every index consistent
//     (checkInvariants, which also round-trips Snapshot/Restore);
//   - the tokens of successive holders of a lock strictly increase;
//   - waiters are FIFO: the model queue of each lock (appended on QUEUED,
//     popped on grants and waits_ended) always equals the machine's queue,
//     and every grant goes to the head of it;
//   - a retried seq changes no lock and no session, and every lock its
//     answer says GRANTED is held by the session with that token; an
//     AcquireMany's first answer is all-or-nothing when it asks so, and
//     its retries answer the same but for the locks whose holds have
//     ended since (set_model_test.go);
//   - a revoke asks every hold it names, each keeps its first revocation,
//     and an EndRevokedHold ends the hold the model says
//     (revoke_model_test.go);
//   - a machine restored from a snapshot halfway answers the rest of the
//     stream exactly like the original (proto.Equal results, equal hashes);
//   - a state frozen at any point encodes to the snapshot of that point
//     while entries go on being applied (freezer);
//   - no lock is granted while in a lock-delay: the model follows the
//     delays the results report started and ended, and the machine's
//     delays always equal them;
//   - every hold and waiter has the value its acquire gave it, or the last
//     one its holder proclaimed: the model keys each by the acquire that
//     made it and follows grants and accepted proclaims, and the
//     machine's values always equal it;
//   - odd seeds run at log version 11 (deadlock detection; from a quarter
//     of the stream on for the seeds that raise their version there):
//     every queued wait and every DEADLOCK refusal agrees with the
//     reference search (checkDeadlockDecision); even seeds never refuse
//     one;
//   - from DeadlockAtGrantVersion (the odd seeds) no entry leaves a node
//     deadlocked that was not before it (checkStalledEnds), and each
//     search after a grant or cancel agrees with the reference in the
//     state it saw (checkStalledSearch); below it no wait ends as a
//     DEADLOCK.
//
// A failure names the seed; rerun it with -run 'TestRandomStream/seed=N'.
var streamSeeds = flag.Int("fsm.stream-seeds", 8, "how many seeds TestRandomStream runs (0 to N-1); a soak: -fsm.stream-seeds=150, about two minutes on 2 cores")

func TestRandomStream(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	for seed := range uint64(*streamSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runStream(t, seed, steps)
		})
	}
}

type streamSession struct {
	id      uint64
	nextSeq uint64
	sent    []*fsmpb.Command // earlier commands, for retries
}

type waiterID struct {
	session, seq uint64
}

type stream struct {
	t   *testing.T
	rng *rand.Rand
	// vrng draws hold values and proclaims, apart from rng so that the
	// streams of the other commands stay what they were.
	vrng     *rand.Rand
	m        *Machine
	restored *Machine // nil until halfway
	index    uint64
	sessions []*streamSession
	ended    []uint64
	// lastOpen is the latest OpenSession with a nonce, and the session it
	// opened: its retry must answer that session while it lives.
	lastOpen   *fsmpb.Command
	lastOpenID uint64

	stats map[string]int // outcomes seen, logged to show coverage
	frz   freezer

	queues     map[string][]waiterID
	lastHolder map[string]uint64               // token of the latest holder seen per lock
	delays     map[string]uint64               // the entry that started each lock's running lock-delay
	revokes    map[revokedHold]revocationModel // each hold being revoked
	values     map[valueRef]string
	sets       map[waiterID][]*fsmpb.AcquireOutcome // each AcquireMany's first answer (set_model_test.go)
	hist       streamHistory                        // every end of a hold (history_model_test.go)
	// keyedFrom: the commands first applied at SameTokenHoldsVersion or
	// above, whose cached answers keep their owner key.
	keyed map[*fsmpb.Command]bool
	skips *int // nodes endStalled left unsearched (checkStalledSearch)
}

// valueRef names the hold or waiter an acquire made: its lock, session,
// owner key and seq.
type valueRef struct {
	lock, key    string
	session, seq uint64
}

var streamLocks = []string{"a", "b", "c", "d/e", "sem", "rw"}

// streamMutexes are the locks of streamLocks that are mutexes; "sem" is a
// semaphore of 3 and "rw" a read/write lock of up to 4 readers.
var streamMutexes = streamLocks[:4]

// streamLimit returns the holder limit and mode of an acquire of name:
// mostly the lock's own kind, sometimes a wrong limit or mode.
func (s *stream) streamLimit(name string) (limit uint32, shared bool) {
	r := s.rng
	switch name {
	case "sem":
		limit, shared = 3, true
	case "rw":
		limit, shared = 4, r.IntN(3) > 0
	default:
		limit = uint32(r.IntN(2)) // 0 and 1 both mean a mutex
	}
	if r.IntN(40) == 0 {
		limit = uint32(r.IntN(5))
	}
	if r.IntN(40) == 0 {
		shared = !shared
	}
	return limit, shared
}

// streamLimitOf is the holder limit of name's lock when used as intended.
func streamLimitOf(name string) int {
	switch name {
	case "sem":
		return 3
	case "rw":
		return 4
	}
	return 1
}

var streamKeys = []string{"", "k"}

// streamLockDelay is the lock-delay of the holds of name: a second for
// "b", "sem" and "rw" (every acquire of a hold states the same), none
// for the others.
func streamLockDelay(name string) int64 {
	switch name {
	case "b", "sem", "rw":
		return int64(time.Second)
	}
	return 0
}

func runStream(t *testing.T, seed uint64, steps int) {
	s := &stream{
		t:          t,
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		vrng:       rand.New(rand.NewPCG(seed, seed^0x5eed)),
		m:          New(),
		queues:     make(map[string][]waiterID),
		lastHolder: make(map[string]uint64),
		delays:     make(map[string]uint64),
		revokes:    make(map[revokedHold]revocationModel),
		values:     make(map[valueRef]string),
		sets:       make(map[waiterID][]*fsmpb.AcquireOutcome),
		stats:      make(map[string]int),
		keyed:      make(map[*fsmpb.Command]bool),
	}
	// The history is replicated from HistoryVersion: seeds with seed%3
	// == 2 raise the version at a quarter of the stream, an entry before
	// the restore, the others start at it, except the even ones with
	// seed%3 == 0, which stay below it. Odd seeds raise it to this
	// release's LogVersion (deadlock detection, a session's end ending its
	// holds first), even ones to HistoryVersion.
	target := uint32(HistoryVersion)
	if seed%2 == 1 {
		target = LogVersion
	}
	if seed%3 == 1 || seed%3 == 0 && seed%2 == 1 {
		s.m.SetLogVersion(target)
	}
	s.skips = checkStalledSearch(t, s.m)
	for step := range steps {
		if seed%3 == 2 && step == steps/4 {
			s.index++
			if res := s.m.Apply(s.index, &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{
				SetLogVersion: &fsmpb.SetLogVersion{Version: target}}}); ErrorOf(res) != nil {
				t.Fatal(res)
			}
		}
		if step == steps/2 {
			b, err := s.m.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			s.restored = New()
			if err := s.restored.Restore(b); err != nil {
				t.Fatal(err)
			}
		}
		s.frz.beforeStep(s)
		s.step()
	}
	if s.frz.f != nil {
		s.frz.left = 0
		s.frz.beforeStep(s)
	}
	t.Logf("outcomes: %v; frozen states encoded, by mode: %v; buffers %d allocated, %d freed, %d outgrown",
		s.stats, s.frz.taken, s.frz.bufs.allocs, s.frz.bufs.frees, s.frz.bufs.outgrown)
	if s.restored.Hash() != s.m.Hash() {
		t.Fatalf("seed %d: restored machine ended with a different hash", seed)
	}
	if s.m.HistoryReplicated() {
		s.checkHistoryAgrees()
	}
}

// checkHistoryAgrees: the machine restored halfway tells the same history
// of every lock as the original, once it is replicated, and the same
// HistoryComplete answers.
func (s *stream) checkHistoryAgrees() {
	for _, name := range streamLocks {
		if got, want := s.restored.PastHolds(name), s.m.PastHolds(name); !slices.Equal(got, want) {
			s.t.Fatalf("history of %s: the restored machine tells %+v, the original %+v", name, got, want)
		}
		s.checkCompleteAgrees(name)
	}
}

func (s *stream) step() {
	s.index++
	if s.rng.IntN(50) == 0 {
		s.m.SetApplied(s.index)
		if s.restored != nil {
			s.restored.SetApplied(s.index)
		}
		return
	}
	cmd, retry := s.command()
	cmd.WallTimeUnixNano = int64(s.index)
	var before []*fsmpb.Lock
	var beforeSessions []*fsmpb.Session
	if retry {
		before, beforeSessions = s.m.Locks("", "", 0), s.m.Sessions(0, 0)
	}
	var pre []*fsmpb.Lock
	stalls := s.m.LogVersion() >= DeadlockAtGrantVersion && !retry
	if cmd.GetAcquire().GetWait() && !retry || stalls {
		pre = s.m.Locks("", "", 0)
	}
	skips := *s.skips
	res := s.m.Apply(s.index, cmd)
	if !retry && s.m.LogVersion() >= SameTokenHoldsVersion {
		s.keyed[cmd] = true
	}
	if stalls {
		checkStalledEnds(s.t, pre, s.m.Locks("", "", 0), cmd, res, *s.skips > skips)
	} else {
		for _, e := range res.GetWaitsEnded() {
			if e.GetError() == fsmpb.Error_ERROR_DEADLOCK {
				s.t.Fatalf("entry %d %v: a wait ended as a DEADLOCK below log version %d", s.index, cmd, DeadlockAtGrantVersion)
			}
		}
	}
	if pre != nil && cmd.GetAcquire().GetWait() {
		if s.m.LogVersion() >= DeadlockVersion {
			checkDeadlockDecision(s.t, pre, cmd, res)
		} else if res.GetError() == fsmpb.Error_ERROR_DEADLOCK {
			s.t.Fatalf("entry %d %v: DEADLOCK below log version %d", s.index, cmd, DeadlockVersion)
		}
	}
	if s.restored != nil {
		if r2 := s.restored.Apply(s.index, cmd); !proto.Equal(res, r2) {
			s.t.Fatalf("entry %d %v: restored machine answered %v, original %v", s.index, cmd, r2, res)
		}
	}
	if retry {
		after, afterSessions := s.m.Locks("", "", 0), s.m.Sessions(0, 0)
		if !equalMessages(before, after) || !equalMessages(beforeSessions, afterSessions) {
			s.t.Fatalf("entry %d: retry %v changed the state", s.index, cmd)
		}
		s.checkRetriedGrants(cmd, res)
	}
	s.checkSet(cmd, res, retry)
	s.observe(cmd, res)
	s.observeValues(cmd, res, retry)
	s.observeHistory()
	if err := checkInvariants(s.m); err != nil {
		s.t.Fatalf("entry %d %v -> %v: %v", s.index, cmd, res, err)
	}
}

// checkRetriedGrants checks a retry's answer: every lock it says GRANTED
// (an Acquire, or an AcquireMany's outcome) is held by the session with
// that token now. The first attempt's hold may have ended since (a
// release, a CasRelease, a hold limit), and the caller of a retry acts on
// its answer.
func (s *stream) checkRetriedGrants(cmd *fsmpb.Command, res *fsmpb.Result) {
	if s.keyed[cmd] {
		s.checkRetriedKeyed(cmd, res)
	}
	outs := res.GetAcquireMany()
	if a := res.GetAcquire(); a != nil {
		outs = append(outs, a)
	}
	for _, o := range outs {
		if o.GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			continue
		}
		s.stats["retried_grants"]++
		l, _ := s.m.Lock(o.GetLock())
		if !slices.ContainsFunc(l.GetHolders(), func(h *fsmpb.Holder) bool {
			return h.GetSessionId() == cmd.GetSessionId() && h.GetToken() == o.GetToken()
		}) {
			s.t.Fatalf("entry %d: retry %v answered %s GRANTED with token %d, but session %d does not hold it so: %v",
				s.index, cmd, o.GetLock(), o.GetToken(), cmd.GetSessionId(), l.GetHolders())
		}
	}
}

func equalMessages[T proto.Message](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return proto.Equal(x, y) })
}

// command returns a random command, and whether it repeats an earlier one.
func (s *stream) command() (*fsmpb.Command, bool) {
	r := s.rng
	if s.lastOpen != nil && r.IntN(60) == 0 {
		if _, live := s.m.Session(s.lastOpenID); live {
			s.stats["open_retries"]++
			return s.lastOpen, true // the retry of an open whose answer was lost
		}
	}
	if r.IntN(200) == 0 {
		// An admin's rotation of the signing key, retiring the current
		// one for up to a few entries' wall clock (or none).
		seed := make([]byte, SigningKeySeedLen)
		seed[0], seed[1] = 1, byte(r.Uint32())
		return &fsmpb.Command{Op: &fsmpb.Command_RotateSigningKey{RotateSigningKey: &fsmpb.RotateSigningKey{
			Seed: seed, RetentionNanos: int64(r.IntN(4)) * 1e9, First: r.IntN(4) == 0}}}, false
	}
	if len(s.sessions) >= 2 && r.IntN(25) == 0 {
		return s.revokeCommand(), false
	}
	if len(s.sessions) < 2 || r.IntN(40) == 0 {
		op := &fsmpb.OpenSession{TtlNanos: int64(rules.DefaultTTL), Owner: fmt.Sprintf("owner-%d", s.index)}
		if r.IntN(2) == 0 {
			op.Nonce = 1 + r.Uint64N(6) // few: other owners collide with a live nonce
		}
		return &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: op}}, false
	}
	ss := s.sessions[r.IntN(len(s.sessions))]
	if len(ss.sent) > 0 && r.IntN(10) == 0 {
		return ss.sent[r.IntN(len(ss.sent))], true
	}
	lockName := streamLocks[r.IntN(len(streamLocks))]
	key := streamKeys[r.IntN(len(streamKeys))]
	var cmd *fsmpb.Command
	switch n := r.IntN(100); {
	case n < 35:
		limit, shared := s.streamLimit(lockName)
		// Holds of key "k" have a hold limit (reentrant acquires
		// must state it), and now and then a wrong one.
		var holdLimit int64
		if key == "k" {
			holdLimit = int64(time.Minute)
		}
		if r.IntN(40) == 0 {
			holdLimit = []int64{0, int64(time.Second), 7}[r.IntN(3)]
		}
		lockDelay := streamLockDelay(lockName)
		if r.IntN(40) == 0 {
			lockDelay = []int64{0, int64(2 * time.Second), 7}[r.IntN(3)]
		}
		cmd = &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
			Lock: lockName, OwnerKey: key, Wait: r.IntN(3) > 0, WaitTimeoutNanos: int64(r.IntN(2)) * 1e9,
			Limit: limit, Shared: shared, HoldLimitNanos: holdLimit, LockDelayNanos: lockDelay, Value: s.someValue()}}}
	case n < 40:
		names := slices.Clone(streamMutexes)
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		names = names[:1+r.IntN(len(names))]
		var limit uint32
		var shared bool
		if r.IntN(4) == 0 {
			// The semaphore, alone or beside mutexes (which then refuse
			// the whole batch: one limit for all).
			names = append(names[:r.IntN(2)], "sem")
			limit, shared = s.streamLimit("sem")
		}
		// One lock-delay for all: "b"'s or "sem"'s if it is in the set
		// (a reentrant grant of another lock is then refused).
		var lockDelay int64
		for _, name := range names {
			lockDelay = max(lockDelay, streamLockDelay(name))
		}
		op := &fsmpb.AcquireMany{Locks: names, OwnerKey: key, Limit: limit, Shared: shared, All: r.IntN(2) == 0, LockDelayNanos: lockDelay}
		if r.IntN(3) == 0 {
			// A mixed set: any of the locks, each in its own mode
			// (now and then a wrong one, as streamLimit gives).
			op.Locks = slices.Clone(streamLocks)
			r.Shuffle(len(op.Locks), func(i, j int) { op.Locks[i], op.Locks[j] = op.Locks[j], op.Locks[i] })
			op.Locks = op.Locks[:1+r.IntN(len(op.Locks))]
			op.Limit, op.Shared, op.LockDelayNanos = 0, false, 0
			for _, name := range op.Locks {
				limit, shared := s.streamLimit(name)
				op.Modes = append(op.Modes, &fsmpb.LockMode{Shared: shared, Limit: limit})
				op.LockDelayNanos = max(op.LockDelayNanos, streamLockDelay(name))
			}
		}
		cmd = &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: op}}
	case n < 65:
		cmd = &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{
			Lock: lockName, OwnerKey: key, Token: s.someToken(lockName)}}}
		if s.vrng.IntN(5) == 0 {
			// A holder's proclaim of a new value instead, mostly of its
			// own hold; sometimes of another's, a stale token or a
			// value too long.
			cmd.Op = &fsmpb.Command_Proclaim{Proclaim: &fsmpb.Proclaim{
				Lock: lockName, OwnerKey: key, Token: cmd.GetRelease().GetToken(), Value: s.someValue()}}
		}
	case n < 70:
		holder := uint64(0)
		if l, ok := s.m.Lock(lockName); ok && len(l.GetHolders()) > 0 && r.IntN(4) > 0 {
			holder = l.GetHolders()[0].GetSessionId()
		} else {
			holder = ss.id
		}
		tok := uint64(0)
		if r.IntN(2) == 0 {
			tok = s.someToken(lockName)
		}
		cmd = &fsmpb.Command{Op: &fsmpb.Command_CasRelease{CasRelease: &fsmpb.CasRelease{
			Lock: lockName, SessionId: holder, Token: tok}}}
		if r.IntN(2) == 0 {
			return cmd, false // from an admin, not a session
		}
	case n < 85:
		w := waiterID{ss.id, 1 + r.Uint64N(ss.nextSeq+1)}
		if q := s.queues[lockName]; len(q) > 0 && r.IntN(4) > 0 {
			w = q[r.IntN(len(q))]
		}
		// Half are timeouts, a quarter a server's cleanup for a caller
		// that went away (abandoned), a quarter the session's own.
		kind := r.IntN(4)
		if l, ok := s.m.Lock(lockName); kind == 2 && ok && len(l.GetHolders()) > 0 && r.IntN(2) == 0 {
			// The grant won the race with the cleanup.
			h := l.GetHolders()[0]
			w = waiterID{h.GetSessionId(), h.GetAcquireSeq()}
		}
		cmd = &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
			Lock: lockName, SessionId: w.session, AcquireSeq: w.seq, TimedOut: kind < 2, Abandoned: kind == 2}}}
		if w.session != ss.id || kind < 3 || r.IntN(2) == 0 {
			// The leader's timeout or cleanup: proposed without a
			// session seq (only the session's own cancel has one, and
			// its answer is cached).
			return cmd, false
		}
	case n < 87:
		return &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{
			SessionId: s.someSession()}}}, false
	case n < 89:
		// The leader's expiry of a hold limit: mostly of a hold that has
		// one, sometimes of one that has none or has ended.
		sid, tok := s.someSession(), s.someToken(lockName)
		var key *string
		if l, ok := s.m.Lock(lockName); ok && len(l.GetHolders()) > 0 && r.IntN(4) > 0 {
			h := l.GetHolders()[r.IntN(len(l.GetHolders()))]
			sid, tok = h.GetSessionId(), h.GetToken()
			if s.m.LogVersion() >= SameTokenHoldsVersion && s.vrng.IntN(2) == 0 {
				// A leader of this release names the hold's owner key
				// (drawn apart, so the other commands stay what they
				// were).
				k := h.GetOwnerKey()
				key = &k
			}
		}
		return &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{
			Lock: lockName, SessionId: sid, Token: tok, OwnerKey: key}}}, false
	case n < 91:
		return &fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{
			SessionId: s.someSession()}}}, false
	case n < 93:
		cmd = &fsmpb.Command{Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}}
	case n < 96:
		// The leader's end of a lock-delay: mostly of the running one,
		// sometimes of one that ended or was restarted.
		from := s.rng.Uint64N(s.index + 1)
		if d, ok := s.delays[lockName]; ok && r.IntN(4) > 0 {
			from = d
		}
		return &fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{
			Lock: lockName, DelayFrom: from}}}, false
	default:
		// A stale or far-ahead seq, or an invalid name.
		cmd = &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: ""}}}
	}
	ss.nextSeq++
	cmd.SessionId = ss.id
	cmd.Seq = ss.nextSeq
	// Pipelined clients acknowledge up to a few seqs back.
	if back := uint64(r.IntN(4)); back < cmd.Seq {
		cmd.MinUnackedSeq = cmd.Seq - back
	}
	ss.sent = append(ss.sent, cmd)
	if len(ss.sent) > 8 {
		ss.sent = ss.sent[1:]
	}
	return cmd, false
}

// someValue is a hold's value: mostly none or a short one, sometimes
// one too long to be accepted.
func (s *stream) someValue() string {
	switch n := s.vrng.IntN(8); {
	case n < 4:
		return ""
	case n == 7 && s.vrng.IntN(4) == 0:
		return strings.Repeat("v", rules.MaxHoldValueLen+1)
	default:
		return fmt.Sprintf("v%d", s.index)
	}
}

// observeValues follows the values cmd gave (res) in the model, and
// checks every hold's and waiter's value against it.
func (s *stream) observeValues(cmd *fsmpb.Command, res *fsmpb.Result, retry bool) {
	if res.GetError() == fsmpb.Error_ERROR_NONE && !retry {
		if a := cmd.GetAcquire(); a != nil {
			o := res.GetAcquire()
			made := o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED ||
				(o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED && o.GetToken() == s.index)
			if made && a.GetValue() != "" {
				s.values[valueRef{a.GetLock(), a.GetOwnerKey(), cmd.GetSessionId(), cmd.GetSeq()}] = a.GetValue()
				s.stats["values_given"]++
			}
		}
		if p := cmd.GetProclaim(); p != nil {
			l, _ := s.m.Lock(p.GetLock())
			for _, h := range l.GetHolders() {
				if h.GetSessionId() == cmd.GetSessionId() && h.GetOwnerKey() == p.GetOwnerKey() {
					s.values[valueRef{p.GetLock(), p.GetOwnerKey(), h.GetSessionId(), h.GetAcquireSeq()}] = p.GetValue()
				}
			}
			s.stats["proclaimed"]++
		}
	}
	for _, l := range s.m.Locks("", "", 0) {
		for _, h := range l.GetHolders() {
			if want := s.values[valueRef{l.GetName(), h.GetOwnerKey(), h.GetSessionId(), h.GetAcquireSeq()}]; h.GetValue() != want {
				s.t.Fatalf("entry %d %v: lock %s holder %v has value %q; the model says %q", s.index, cmd, l.GetName(), h, h.GetValue(), want)
			}
		}
		for _, w := range l.GetWaiters() {
			if want := s.values[valueRef{l.GetName(), w.GetOwnerKey(), w.GetSessionId(), w.GetAcquireSeq()}]; w.GetValue() != want {
				s.t.Fatalf("entry %d %v: lock %s waiter %v has value %q; the model says %q", s.index, cmd, l.GetName(), w, w.GetValue(), want)
			}
		}
	}
}

func (s *stream) someToken(lockName string) uint64 {
	if l, ok := s.m.Lock(lockName); ok && len(l.GetHolders()) > 0 && s.rng.IntN(5) > 0 {
		return l.GetHolders()[s.rng.IntN(len(l.GetHolders()))].GetToken()
	}
	return s.rng.Uint64N(s.index + 1)
}

func (s *stream) someSession() uint64 {
	if len(s.ended) > 0 && s.rng.IntN(5) == 0 {
		return s.ended[s.rng.IntN(len(s.ended))]
	}
	return s.sessions[s.rng.IntN(len(s.sessions))].id
}

// observe updates the model from cmd's result and checks it against the
// machine.
func (s *stream) observe(cmd *fsmpb.Command, res *fsmpb.Result) {
	t := s.t
	s.stats[res.GetError().String()]++
	s.stats[res.GetAcquire().GetStatus().String()]++
	for _, o := range res.GetAcquireMany() {
		s.stats["many_"+o.GetStatus().String()]++
	}
	s.stats["grants"] += len(res.GetGrants())
	s.stats["waits_ended"] += len(res.GetWaitsEnded())
	for _, e := range res.GetWaitsEnded() {
		if e.GetError() == fsmpb.Error_ERROR_DEADLOCK {
			s.stats["waits_ended_deadlocked"]++
		}
	}
	if eh := cmd.GetExpireHold(); eh != nil {
		s.stats["expire_hold_"+res.GetError().String()]++
		for _, e := range res.GetHoldsEnded() {
			if eh.OwnerKey != nil && e.GetOwnerKey() != eh.GetOwnerKey() {
				t.Fatalf("entry %d: %v ended the hold of key %q", s.index, cmd, e.GetOwnerKey())
			}
		}
	}
	if cmd.GetCancelWait().GetAbandoned() && res.GetError() == fsmpb.Error_ERROR_NONE && res.GetAcquire() != nil {
		s.stats["abandoned_grants_released"]++
	}
	if id := res.GetSessionId(); id != 0 {
		if op := cmd.GetOpenSession(); op.GetNonce() != 0 {
			if cmd == s.lastOpen && id != s.lastOpenID {
				t.Fatalf("entry %d: the retry of the open of session %d answered session %d", s.index, s.lastOpenID, id)
			}
			// Only a session that got the nonce (none live had it) is
			// found again by a retry.
			if ss, ok := s.m.Session(id); ok && ss.GetOpenNonce() == op.GetNonce() {
				s.lastOpen, s.lastOpenID = cmd, id
			}
		}
		if !slices.ContainsFunc(s.sessions, func(ss *streamSession) bool { return ss.id == id }) {
			s.sessions = append(s.sessions, &streamSession{id: id})
		}
	}
	if o := res.GetAcquire(); o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED && cmd.GetAcquire() != nil {
		w := waiterID{cmd.GetSessionId(), cmd.GetSeq()}
		q := s.queues[o.GetLock()]
		if !slices.Contains(q, w) { // not a retry answered from the cache
			if int(o.GetPosition()) != len(q)+1 {
				t.Fatalf("entry %d: queued at position %d behind %d waiters", s.index, o.GetPosition(), len(q))
			}
			s.queues[o.GetLock()] = append(q, w)
		}
	}
	for _, w := range res.GetWaitsEnded() {
		id := waiterID{w.GetSessionId(), w.GetAcquireSeq()}
		q := s.queues[w.GetLock()]
		i := slices.Index(q, id)
		if i < 0 {
			t.Fatalf("entry %d: wait of %v ended but the model has no such waiter", s.index, id)
		}
		s.queues[w.GetLock()] = slices.Delete(q, i, i+1)
	}
	// A grant goes to the head of its queue; from DeadlockAtGrantVersion
	// the node granted a lock also re-enters it with its other waits for
	// it, wherever they are queued (the model cannot tell owner keys
	// apart, so it only asks that the session got the lock before in the
	// entry).
	type sessionLock struct {
		id   uint64
		lock string
	}
	var grantedNow []sessionLock
	for _, g := range res.GetGrants() {
		q := s.queues[g.GetLock()]
		id, sl := waiterID{g.GetSessionId(), g.GetAcquireSeq()}, sessionLock{g.GetSessionId(), g.GetLock()}
		i := slices.Index(q, id)
		if i != 0 && (i < 0 || s.m.LogVersion() < DeadlockAtGrantVersion || !slices.Contains(grantedNow, sl)) {
			t.Fatalf("entry %d: grant %v is not to the head of the queue %v", s.index, g, q)
		}
		if g.GetToken() != s.index {
			t.Fatalf("entry %d: grant with token %d", s.index, g.GetToken())
		}
		s.queues[g.GetLock()] = slices.Delete(q, i, i+1)
		grantedNow = append(grantedNow, sl)
	}
	for _, id := range res.GetSessionsEnded() {
		s.sessions = slices.DeleteFunc(s.sessions, func(ss *streamSession) bool { return ss.id == id })
		s.ended = append(s.ended, id)
	}
	s.observeDelays(cmd, res)
	s.observeRevokes(cmd, res)
	for _, name := range streamLocks {
		l, _ := s.m.Lock(name)
		var got []waiterID
		for _, w := range l.GetWaiters() {
			got = append(got, waiterID{w.GetSessionId(), w.GetAcquireSeq()})
		}
		if !slices.Equal(got, s.queues[name]) {
			t.Fatalf("entry %d: lock %s queue is %v, the model says %v", s.index, name, got, s.queues[name])
		}
		hs := l.GetHolders()
		// A lock's limit is its first acquirer's: now and then a wrong
		// one (streamLimit) makes a mutex name a semaphore.
		if limit := max(streamLimitOf(name), int(l.GetLimit())); len(hs) > limit {
			t.Fatalf("entry %d: lock %s has %d holders: %v", s.index, name, len(hs), l)
		}
		for _, h := range hs {
			if !h.GetShared() && len(hs) > 1 {
				t.Fatalf("entry %d: lock %s has an exclusive holder beside %d others", s.index, name, len(hs)-1)
			}
			// A hold the model has not seen has a token above every
			// earlier hold's: the index of this entry, which granted it.
			tok := h.GetToken()
			if last := s.lastHolder[name]; tok > last {
				if tok != s.index {
					t.Fatalf("entry %d: lock %s has a new hold with token %d", s.index, name, tok)
				}
				s.lastHolder[name] = tok
			}
		}
		if len(hs) > 0 {
			s.stats[fmt.Sprintf("holders=%d", len(hs))]++
		}
	}
}

// observeDelays follows the lock-delays res reports started and ended,
// and checks that no lock was granted in one: a grant of this entry goes
// to a lock whose delay, if it had one, this entry ended; and no lock in
// its delay after the entry has a hold this entry granted.
// grantedBeforeHoldsEnded reports whether a grant (shared or not) of lock
// by cmd is one the rules allowed below EndHoldsFirstVersion: a session's
// end granted a permit or a read behind its own wait beside its ending
// hold, before that hold ended and started the lock's delay in the same
// entry.
func (s *stream) grantedBeforeHoldsEnded(cmd *fsmpb.Command, lock string, shared bool) bool {
	return s.m.LogVersion() < EndHoldsFirstVersion && shared && s.delays[lock] == s.index &&
		(cmd.GetExpireSession() != nil || cmd.GetCloseSession() != nil)
}

func (s *stream) observeDelays(cmd *fsmpb.Command, res *fsmpb.Result) {
	t := s.t
	lv := res.GetLiveness()
	ended := lv.GetLockDelayEnded()
	if ended != nil {
		if s.delays[ended.GetLock()] != ended.GetDelayFrom() || cmd.GetEndLockDelay() == nil {
			t.Fatalf("entry %d: %v ended lock-delay %v; the model has %d", s.index, cmd, ended, s.delays[ended.GetLock()])
		}
		delete(s.delays, ended.GetLock())
		s.stats["lock_delays_ended"]++
	}
	for _, d := range lv.GetLockDelaysStarted() {
		if d.GetDelayFrom() != s.index || d.GetDelayNanos() <= 0 {
			t.Fatalf("entry %d: lock-delay %v", s.index, d)
		}
		s.delays[d.GetLock()] = d.GetDelayFrom()
		s.stats["lock_delays_started"]++
	}
	for _, name := range streamLocks {
		l, _ := s.m.Lock(name)
		if l.GetDelayFrom() != s.delays[name] {
			t.Fatalf("entry %d %v -> %v: lock %s is in the lock-delay from %d, the model says %d", s.index, cmd, res, name, l.GetDelayFrom(), s.delays[name])
		}
		if l.GetDelayFrom() == 0 {
			continue
		}
		for _, h := range l.GetHolders() {
			// Below EndHoldsFirstVersion a session's end may grant a
			// permit or a read beside its own ending hold, in the entry
			// that starts the lock's delay.
			if h.GetToken() == s.index && !s.grantedBeforeHoldsEnded(cmd, name, h.GetShared()) {
				t.Fatalf("entry %d %v -> %v: lock %s was granted in its lock-delay: %v", s.index, cmd, res, name, l)
			}
		}
		if res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_BUSY && res.GetAcquire().GetLock() == name &&
			cmd.GetAcquire() != nil && res.GetAcquire().GetDelayedUntilUnixNano() == 0 && !s.m.HasResult(cmd.GetSessionId(), cmd.GetSeq()) {
			t.Fatalf("entry %d: a BUSY answer about %s in its lock-delay does not say until when", s.index, name)
		}
	}
	for _, g := range res.GetGrants() {
		if _, ok := s.delays[g.GetLock()]; ok && !s.grantedBeforeHoldsEnded(cmd, g.GetLock(), g.GetShared()) {
			t.Fatalf("entry %d: grant %v of a lock in its lock-delay", s.index, g)
		}
		if ended != nil && ended.GetLock() == g.GetLock() {
			s.stats["grants_after_lock_delay"]++
		}
	}
}
