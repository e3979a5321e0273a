package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/raftnode"
)

// Config shapes one scenario. Seed decides everything else.
type Config struct {
	Seed uint64
	// Nodes is 3 or 5; Clients and Locks size the workload.
	Nodes, Clients, Locks int
	// Chaos is the virtual time with faults and load; Calm follows it with
	// every fault healed, clients stopped, until sessions expire and every
	// member converges, or for Calm at most (Sim.settle).
	Chaos, Calm time.Duration
	// Faults enables crashes, partitions and message faults.
	Faults bool
	// RetryAbandoned makes a client whose connection dropped while its
	// acquire waited retry the same (session, seq), as the exactly-once
	// contract allows, instead of giving up (TestAbandonedWaitRetry).
	// ConfigFor turns it on for three seeds in four, so both the retry
	// (a claimed request) and the caller that never comes back (the
	// cleanup releasing a grant) are explored.
	RetryAbandoned bool
	// Semaphores is the number of locks of SemaphorePermits holders
	// ("sem/0", ...) that clients acquire beside the mutexes, one acquire
	// in four: shared (a permit, a reader) two times in three, else
	// exclusive (a writer). The log checks (at most that many holders at
	// any index, tokens, replay), the fenced-write check (a client writes
	// under a permit only while the server agrees it holds it) and the
	// linearizability model (a set of holds per semaphore) cover them.
	Semaphores int
	// HoldLimits gives one acquire in three a hold limit of 1-2 s (the
	// state machine refuses less than rules.MinHoldLimit, 1 s).
	// Clients renew half of those holds when half the limit is gone
	// (from when the renewal was sent, as the library does) and let the
	// others run out: the leader expires them, and a client stops using
	// a hold at its deadline (the acquire's first send, or the last
	// granted renewal's, plus the limit less the safety margin). The
	// fenced-write check holds it to that.
	HoldLimits bool
	// Members makes one fault in ten a membership change on the
	// leader (raftnode.ProposeMembership): a member added (empty disk,
	// Join) as a learner or a voter, a learner promoted, or a member
	// removed, the leader included. Members that applied a removal tell
	// the removed member when it sends them anything, as the transport
	// does, and it stops for good. The log checks replay the changes; the
	// final checks hold the group the leader ends with to convergence,
	// and no member that stopped as removed may be in it.
	Members bool
	// Many makes clients also try several mutexes in one acquire_many
	// (each on its own, or all or none; with HoldLimits, a hold limit for
	// all of them one time in three); with Semaphores, one set in three
	// also takes a semaphore's permit or writer, each lock in its own
	// mode (AcquireMany.modes). The history gets one try per lock
	// it answered for, so the model checks each lock, not the atomicity
	// across them (the log checks see the one entry).
	Many bool
	// Upgrade starts the cluster on a release that reads log version 1
	// (as releases before versions do) and upgrades its members to this
	// release's version (fsm.LogVersion) while it runs: a member that
	// crashes comes back upgraded one time in two, and the heal upgrades
	// the rest (a clean restart). A member tells those it sends to which
	// version it reads, as the transport's Hello does, and the leader's
	// node raises the cluster's version once all do
	// (Config.LogVersionDue, raftnode.MembersLogVersion), as in embed. A member that stops at an entry above its version
	// fails v/stopped; after heal the cluster must be at fsm.LogVersion.
	Upgrade bool
	// Reentrant makes clients also take again, one action in sixteen, a
	// mutex they hold (same token, count + 1; a wait is granted at once),
	// and release one count at a time: a hold ends when its count does.
	// The model follows each hold's count, so an acquire applied twice
	// (a retry that became a second count) or a count lost shows as a
	// release's remaining count it cannot explain; a retried acquire
	// whose hold has ended since must say so (NOT_HOLDER), not GRANTED.
	Reentrant bool
	// Strangers adds an actor that acts for sessions that are not its
	// own (stranger.go): every so often it picks a client's live session
	// that has a secret and holds a lock (ids and tokens are public) and
	// sends a random member a release of a hold, an acquire of another
	// lock with a high seq, a close of the session, a keepalive of it or
	// a renewal of a limited hold, showing no secret or a wrong one. An
	// answer that is a success fails the run (check "stranger"); the
	// other checkers see that the victims went on untouched.
	Strangers bool
	// LockDelays gives every hold of the locks whose name ends in an even
	// digit ("lock/0", "lock/2", "sem/0") a lock-delay of one second
	// (lockDelayOf): when such a hold ends by its session's expiry or
	// its hold limit, the lock is granted to no one for that second.
	// Check h/lock-delay replays the log: no lock is granted while in a
	// delay, and each delay ends (EndLockDelay, proposed by the leader's
	// tracker) no earlier than its length after the entry that started
	// it, by the proposers' clocks, whatever leader changes came between.
	// The linearizability model takes a BUSY answer that says the lock is
	// in its delay as needing no other holder.
	LockDelays bool
	// Revokes adds an operator that asks the holders of random locks to
	// let go (revoke.go): each holder is told, stops using its hold and
	// releases it or not; the leader ends a hold still there at its
	// grace (EndRevokedHold). The model takes that end as it takes a
	// hold limit's expiry, and the fence checks (c) hold the holders that
	// were told to it.
	Revokes bool
	// Values gives half the acquires of mutexes a value (an election's
	// candidate's) and has holders proclaim new ones (Proclaim). The
	// linearizability model follows each mutex's value, and a check
	// reads the holder's value and must see the model's.
	Values bool
	// Keys makes each client acquire under one of two owner keys ("" and
	// "k2"), drawn per acquire, try or acquire_many, as two workers
	// sharing one session: each (session, key) is an owner of its own
	// (BUSY or queued behind the session's other key; a semaphore's
	// permit apiece), a reentrant acquire re-enters the hold of its key,
	// and a release, proclaim or write names the key its hold has. The
	// client believes what it holds per (lock, key); the model's
	// holders, the fence (c), revocation (j) and deadlock (i) checks are
	// per (session, key). It is what reaches log version 14's rules for
	// several keys: a node's other waits re-entering its grant, waits
	// ended as deadlocked at a grant or cancel, holds sharing a token.
	Keys bool
	// DiskGuard gives every member a disk guard (--min-free-disk,
	// internal/server's DiskGuard) and makes 8 chaos draws in 100 a
	// stretch of 0.2-2 s in which the data dir of a member (often the
	// leader), or of every member, is under its minimum free space
	// (space.go). A member that leads meanwhile refuses opens and
	// acquires with NO_SPACE by the real server's rule: after a read
	// barrier, unless the request is a retry that adds nothing, and an
	// acquire only once its seq fence settled the seq. Clients take
	// NO_SPACE as a definitive refusal; the model takes it as no
	// effect, check (k) follows these fences too, and a session that a
	// refused open's earlier attempt opened must never act (k/orphan).
	DiskGuard bool
	// Trace, if set, receives the run's events as text (for reading a
	// failing seed; -sim.trace in tests).
	Trace io.Writer
}

// ConfigFor derives a scenario's shape from its seed.
func ConfigFor(seed uint64) Config {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	nodes := 3
	if r.IntN(4) == 0 {
		nodes = 5
	}
	return Config{
		Seed:    seed,
		Nodes:   nodes,
		Clients: 3 + r.IntN(4),
		Locks:   1 + r.IntN(3),
		Chaos:   time.Duration(3+r.IntN(5)) * time.Second,
		Calm:    5 * time.Second,
		Faults:  true,
		// Drawn last, so the fields above stay what they were for a seed.
		RetryAbandoned: r.IntN(4) != 0,
		Semaphores:     r.IntN(3),
		HoldLimits:     r.IntN(2) == 0,
		Members:        r.IntN(2) == 0,
		Many:           r.IntN(2) == 0,
		Upgrade:        r.IntN(2) == 0,
		Reentrant:      r.IntN(2) == 0,
		Strangers:      r.IntN(2) == 0,
		LockDelays:     r.IntN(2) == 0,
		Revokes:        r.IntN(2) == 0,
		Values:         r.IntN(2) == 0,
		Keys:           r.IntN(2) == 0,
		DiskGuard:      r.IntN(2) == 0,
	}
}

// lockDelayOf is the lock-delay the clients of a scenario with
// LockDelays give every hold of lock (the same for every acquire of it:
// a reentrant one must state its hold's).
func (s *Sim) lockDelayOf(lock string) time.Duration {
	if !s.cfg.LockDelays || (lock[len(lock)-1]-'0')%2 != 0 {
		return 0
	}
	return time.Second
}

// SemaphorePermits is the holder limit of the simulated semaphores.
const SemaphorePermits = 2

// holderLimit is the number of holders lock may have in a scenario.
func holderLimit(lock string) int {
	if isSemaphore(lock) {
		return SemaphorePermits
	}
	return 1
}

func isSemaphore(lock string) bool { return strings.HasPrefix(lock, "sem/") }

// Timing of the simulated world. An election takes 100-200 ms, ten to
// twenty times the usual trip between members. The leader sends its
// heartbeats every two ticks, five or more per election timeout, as a
// member with a 20 ms tick and five election ticks does: they are most
// of the raft messages a scenario carries, and sending them every tick
// would double that work and leave the faults, elections and client
// operations a scenario explores much the same.
const (
	tick           = 10 * time.Millisecond
	electionTicks  = 10
	heartbeatTicks = 2
	// reqTimeout is how long a client waits for an answer before it
	// treats the outcome as unknown.
	reqTimeout = 400 * time.Millisecond
	// safetyMargin is what the client subtracts from TTL (DESIGN.md §2).
	safetyMargin = 20 * time.Millisecond
	maxTries     = 4
)

// epoch is virtual time zero (no monotonic reading: comparisons are
// exact).
var epoch = time.Unix(1_700_000_000, 0).UTC()

// Stats counts what a scenario explored.
type Stats struct {
	Events, Messages, Dropped, Duplicated, Crashes, TornWrites, Partitions,
	Heals, HBPauses, GCPauses, NodePauses, SlowReplies, ConnDrops, SlowClocks, Ops, Unknown, Writes, WritesRejected,
	Elections, SnapsSent, Entries uint64
	// AbandonsReleased counts abandoned waits whose grant had won the race
	// and was released by the abandon's entry; AbandonsKept those whose
	// grant stayed (a retry claimed it, or its answer was forgotten).
	AbandonsReleased, AbandonsKept uint64
	// HoldsExpired counts holds the leader ended at their hold limit;
	// Renewals the hold renewals clients were granted.
	HoldsExpired, Renewals uint64
	// MemberChanges counts membership changes proposed, MembersApplied
	// those the proposer saw apply, Retired the members that stopped
	// because they were removed.
	MemberChanges, MembersApplied, Retired uint64
	// Upgrades counts members restarted on this release's log version,
	// VersionRaises the SetLogVersion entries committed.
	Upgrades, VersionRaises uint64
	// Reentered counts reentrant acquires granted (count 2 or more),
	// CountsReleased the releases that left a count of the hold.
	Reentered, CountsReleased uint64
	// StrangerSent counts the requests strangers sent, StrangerRefused
	// those answered that they did not show the session's secret: by the
	// state machine or, for keepalives and renewals, by the leader's
	// tracker (StrangerRefusedByTracker of them).
	StrangerSent, StrangerRefused, StrangerRefusedByTracker uint64
	// LockDelays counts the lock-delays the log started, LockDelaysEnded
	// those it ended, and DelayedBusy the tries answered BUSY because the
	// lock was in its delay.
	LockDelays, LockDelaysEnded, DelayedBusy uint64
	// Revokes counts the revokes proposed, RevokesTold the holders told,
	// RevokesHonoured those that released their hold in reply, and
	// HoldsRevoked the holds the leader ended at their grace.
	Revokes, RevokesTold, RevokesHonoured, HoldsRevoked uint64
	// MixedSetGrants counts the locks granted by acquire_many entries
	// that gave each lock its own mode (a mutex beside a semaphore's
	// permit or writer).
	MixedSetGrants uint64
	// HistoryEnds counts the ends of holds in the replicated history of
	// the first member of the converged group, which the members' hashes
	// compare; HistoryValues those of them that kept their hold's value
	// (from fsm.WatchHistoryVersion), and HistoryFloors the scenarios
	// whose history had a floor (fsm.Machine.HistoryComplete), which
	// the hashes compare too.
	HistoryEnds, HistoryValues, HistoryFloors uint64
	// Proclaims counts the proclaims that set a value, ValuesRead the
	// checks that read a holder's value (Config.Values).
	Proclaims, ValuesRead uint64
	// Deadlocks counts the acquires the replayed log refused as closing
	// a deadlock (each one checked by checker i); DeadlocksEnded the
	// waits it ended as deadlocked at a grant or cancel (log version 14,
	// each one checked by checker i too).
	Deadlocks, DeadlocksEnded uint64
	// FencesSettled counts the seq fences (fsm.SeqFence) the replayed log
	// applied that settled a refused request's seq, FencesFoundAnswer
	// those that found an earlier attempt applied, FencedRetries the
	// requests of a settled seq answered REFUSED (each checked by k).
	FencesSettled, FencesFoundAnswer, FencedRetries uint64
	// What only several owner keys per session make (Config.Keys):
	// WaitsLeft counts the waits a client's worker left waiting while
	// the client went on; from the replayed log, ReenteredAtGrant the
	// grants that re-entered a hold its node was granted in the same
	// entry (its other waits for the lock, log version 14), OwnKeyBusy
	// the acquires answered BUSY or QUEUED while their session held the
	// lock under another key, SessionKeyHolds the holds granted beside a
	// hold of their session under another key (a semaphore's permits),
	// and SameTokenHolds those of them that share its token (granted in
	// one entry).
	WaitsLeft, ReenteredAtGrant, OwnKeyBusy, SessionKeyHolds, SameTokenHolds uint64
	// What the disk guard makes (Config.DiskGuard): DiskLows counts the
	// stretches of low data dirs injected; NoSpaceRefused the opens and
	// acquires leaders refused for their disk, NoSpaceAdmitted the
	// retries they admitted as adding nothing, NoSpaceTold the client
	// operations answered NO_SPACE; from the replayed log, the seq
	// fences proposed for NO_SPACE refusals that settled their seq
	// (NoSpaceFencesSettled) or found an earlier attempt applied
	// (NoSpaceFencesFoundAnswer), and the later attempts of a seq so
	// settled refused (NoSpaceFencedRetries); NoSpaceOrphans the
	// sessions opened by an earlier attempt of an open its client was
	// told NO_SPACE (each checked by k/orphan).
	DiskLows, NoSpaceRefused, NoSpaceAdmitted, NoSpaceTold, NoSpaceFencesSettled, NoSpaceFencesFoundAnswer,
	NoSpaceFencedRetries, NoSpaceOrphans uint64
	// ProposalsDeferred counts the waiting acquires leaders held back
	// for the next proposal (raftnode's Metrics.Deferred, summed over the
	// nodes, crashed ones included).
	ProposalsDeferred uint64
}

// Faults is the number of injected faults.
func (s Stats) Faults() uint64 {
	return s.Crashes + s.TornWrites + s.Partitions + s.HBPauses + s.GCPauses + s.NodePauses + s.Dropped + s.Duplicated + s.SlowReplies + s.ConnDrops + s.SlowClocks +
		s.DiskLows
}

// Result is a scenario's outcome.
type Result struct {
	Config    Config
	TraceHash string
	Stats     Stats
	// Err is the first checker violation, nil if every checker passed.
	Err error
	// Linearizability is porcupine's verdict ("Ok", or "Unknown" when it
	// ran out of time; "Illegal" sets Err).
	Linearizability string

	history []porcupine.Operation
}

// Sim is one running scenario.
type Sim struct {
	cfg Config
	rng *rand.Rand
	// secrets draws the clients' session secrets (drawSecret).
	secrets *rand.Rand
	now     int64 // virtual nanoseconds since epoch
	seq     uint64
	q       eventQueue
	trace   hash.Hash
	// traceBuf is reused for what each trace line folds into trace.
	traceBuf []byte
	stats    Stats
	err      error

	// initial are the members a new group bootstraps with; peers are the
	// members that run or may run (the initial ones and those added,
	// until they stop as removed).
	initial []uint64
	peers   []uint64
	nodes   map[uint64]*member
	change  *pendingChange // the membership change last proposed, until answered
	added   int
	net     network
	clients []*client
	calm    bool
	// pending counts the events queued that are not routine; settled
	// ends the run early, lastQuiet is the leader's status at the last
	// look that found the run quiet (settle).
	pending   int
	settled   bool
	lastQuiet raftnode.Status
	// end is when the run ends at the latest; inFlight counts the raft
	// messages sent and not yet delivered or lost; until idleUntil every
	// member's raft clock stands still (idle.go).
	end       int64
	inFlight  int
	idleUntil int64

	chk checker
}

// Run runs one scenario to the end and checks it.
func Run(cfg Config) Result {
	s := &Sim{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		secrets: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5ec7e75ec7e75ec7)),
		trace:   sha256.New(),
		nodes:   make(map[uint64]*member),
	}
	s.chk.init(s)
	for i := range cfg.Nodes {
		s.peers = append(s.peers, uint64(i+1))
	}
	s.initial = slices.Clone(s.peers)
	s.net.init(s)
	for _, id := range s.peers {
		m := &member{s: s, id: id, disk: &disk{}, reads: fsm.LogVersion}
		if cfg.Upgrade {
			m.reads = 1
		}
		s.nodes[id] = m
		m.start()
		// Each member's ticker has its own phase.
		m.scheduleTick(time.Duration(s.rng.Int64N(int64(tick))))
	}
	for i := range cfg.Clients {
		c := newClient(s, i)
		s.clients = append(s.clients, c)
		s.after(time.Duration(s.rng.Int64N(int64(200*time.Millisecond))), c.think)
	}
	if cfg.Faults {
		s.after(time.Duration(s.rng.Int64N(int64(500*time.Millisecond))), s.chaos)
	}
	if cfg.Strangers {
		s.after(s.dur(20*time.Millisecond, 200*time.Millisecond), newStranger(s).act)
	}
	if cfg.Revokes {
		s.after(s.dur(100*time.Millisecond, 600*time.Millisecond), s.revoke)
	}
	s.at(int64(cfg.Chaos), s.heal)
	s.end = int64(cfg.Chaos + cfg.Calm)
	s.loop(s.end)
	for _, m := range s.nodes {
		if m.up() {
			s.stats.ProposalsDeferred += m.node.Metrics().Deferred
		}
	}
	res := Result{Config: cfg, TraceHash: hex.EncodeToString(s.trace.Sum(nil)), Stats: s.stats, Err: s.err, Linearizability: s.chk.linVerdict,
		history: s.chk.fullHistory}
	return res
}

// loop runs events until end, then the final checks. A panic anywhere
// (raft's own invariant checks, the fsm's) is a failure of the seed.
func (s *Sim) loop(end int64) {
	defer func() {
		if r := recover(); r != nil {
			s.err = fmt.Errorf("panic at t=%v: %v\n%s", time.Duration(s.now), r, debug.Stack())
		}
	}()
	for s.q.Len() > 0 && s.err == nil && !s.settled {
		e := s.q.pop()
		if e.at > end {
			break
		}
		if !e.routine {
			s.pending--
		}
		s.now = e.at
		s.stats.Events++
		e.fn()
	}
	if s.err == nil {
		s.finalChecks()
	}
}

// Now is the virtual clock as a time.Time (for liveness and records).
func (s *Sim) Now() time.Time { return epoch.Add(time.Duration(s.now)) }

func (s *Sim) at(t int64, fn func()) {
	s.seq++
	s.pending++
	s.q.push(event{at: t, seq: s.seq, fn: fn})
}

func (s *Sim) after(d time.Duration, fn func()) { s.at(s.now+int64(max(d, 0)), fn) }

// afterRoutine schedules fn as after does, for the work the cluster
// makes by itself for as long as it runs (ticks, raft messages, disk
// completions): the calm may end while such events are pending (settle).
func (s *Sim) afterRoutine(d time.Duration, fn func()) {
	s.seq++
	s.q.push(event{at: s.now + int64(max(d, 0)), seq: s.seq, fn: fn, routine: true})
}

// tracef folds a line into the trace hash (the run's fingerprint).
func (s *Sim) tracef(format string, args ...any) {
	b := binary.LittleEndian.AppendUint64(s.traceBuf[:0], uint64(s.now))
	b = fmt.Appendf(b, format, args...)
	s.trace.Write(b)
	s.traceBuf = b[:0]
	if s.cfg.Trace != nil {
		fmt.Fprintf(s.cfg.Trace, "%12v ", time.Duration(s.now))
		fmt.Fprintf(s.cfg.Trace, format+"\n", args...)
	}
}

func (s *Sim) traceMsg(from, to uint64, m *raftpb.Message) {
	b := s.traceBuf[:0]
	for _, v := range [...]uint64{uint64(s.now), from<<32 | to, uint64(m.GetType()), m.GetTerm(), m.GetIndex(), m.GetCommit()} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	s.trace.Write(b)
	s.traceBuf = b[:0]
	if s.cfg.Trace != nil {
		fmt.Fprintf(s.cfg.Trace, "%12v deliver %d->%d %v term %d index %d logterm %d commit %d reject %v ents %d\n", time.Duration(s.now), from, to,
			m.GetType(), m.GetTerm(), m.GetIndex(), m.GetLogTerm(), m.GetCommit(), m.GetReject(), len(m.GetEntries()))
	}
}

// fail records the first violation; the run stops after the current event.
func (s *Sim) fail(checker, format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("checker %s at t=%v: %s", checker, time.Duration(s.now), fmt.Sprintf(format, args...))
	}
}

func (s *Sim) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// network carries raft messages between members with the current faults.
type network struct {
	s *Sim
	// cut[a][b]: messages from a to b are lost.
	cut                map[[2]uint64]bool
	drop, dup          float64
	minDelay, maxDelay time.Duration
}

func (n *network) init(s *Sim) {
	n.s = s
	n.cut = make(map[[2]uint64]bool)
	n.minDelay, n.maxDelay = 500*time.Microsecond, 5*time.Millisecond
}

// Send implements raftnode.Transport.
func (n *network) Send(_ uint64, msgs []*raftpb.Message) {
	s := n.s
	for _, msg := range msgs {
		from, to := msg.GetFrom(), msg.GetTo()
		s.stats.Messages++
		if msg.GetType() == raftpb.MsgSnap {
			s.stats.SnapsSent++
		}
		if n.cut[[2]uint64{from, to}] {
			s.stats.Dropped++
			if src := s.nodes[from]; src.up() {
				src.node.ReportUnreachable(to)
			}
			continue
		}
		if n.drop > 0 && s.rng.Float64() < n.drop {
			s.stats.Dropped++
			continue
		}
		reads := s.nodes[from].reads // said in the Hello of its connection
		copies := 1
		if n.dup > 0 && s.rng.Float64() < n.dup {
			copies = 2
			s.stats.Duplicated++
		}
		for range copies {
			c := copyMessage(msg)
			d := s.dur(n.minDelay, n.maxDelay)
			s.inFlight++
			s.afterRoutine(d, func() {
				s.inFlight--
				if n.cut[[2]uint64{from, to}] {
					return // partitioned while in flight
				}
				s.traceMsg(from, to, c)
				if dst := s.nodes[to]; dst.up() {
					dst.heard[from] = reads
				}
				s.nodes[to].deliver(c)
			})
		}
	}
}

// chaos injects one random fault and schedules the next.
func (s *Sim) chaos() {
	if s.calm {
		return
	}
	lead := s.leader()
	s.pollChange()
	switch k := s.rng.IntN(100); {
	case s.cfg.Members && k < 10: // a membership change
		s.changeMembership()
	case k < 22: // crash a member, often the leader; restart it later
		victim := s.peers[s.rng.IntN(len(s.peers))]
		if lead != 0 && s.rng.IntN(2) == 0 {
			victim = lead
		}
		m := s.nodes[victim]
		if m.up() {
			if s.rng.IntN(4) == 0 {
				// Crash in the middle of the next write: torn tail.
				m.disk.tearNext = 1 + s.rng.IntN(3)
			} else {
				m.crash()
			}
			s.after(s.dur(20*time.Millisecond, 1500*time.Millisecond), m.restart)
		}
	case k < 40: // partition: isolate one member (often the leader), both ways or one way
		victim := s.peers[s.rng.IntN(len(s.peers))]
		if lead != 0 && s.rng.IntN(2) == 0 {
			victim = lead
		}
		oneWay := s.rng.IntN(3) == 0
		inbound := s.rng.IntN(2) == 0
		for _, p := range s.peers {
			if p == victim {
				continue
			}
			if !oneWay || !inbound {
				s.net.cut[[2]uint64{victim, p}] = true
			}
			if !oneWay || inbound {
				s.net.cut[[2]uint64{p, victim}] = true
			}
		}
		s.stats.Partitions++
		s.tracef("isolate %d oneway=%v in=%v", victim, oneWay, inbound)
		s.after(s.dur(100*time.Millisecond, 2*time.Second), s.healNet)
	case k < 50: // random split into two groups
		perm := s.rng.Perm(len(s.peers))
		cut := 1 + s.rng.IntN(len(s.peers)-1)
		side := make(map[uint64]bool)
		for _, i := range perm[:cut] {
			side[s.peers[i]] = true
		}
		for _, a := range s.peers {
			for _, b := range s.peers {
				if side[a] != side[b] {
					s.net.cut[[2]uint64{a, b}] = true
				}
			}
		}
		s.stats.Partitions++
		s.tracef("split %v", perm[:cut])
		s.after(s.dur(100*time.Millisecond, 2*time.Second), s.healNet)
	case k < 62: // message faults for a while
		s.net.drop = []float64{0, 0.02, 0.1, 0.3}[s.rng.IntN(4)]
		s.net.dup = []float64{0, 0.02, 0.1}[s.rng.IntN(3)]
		s.net.maxDelay = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond}[s.rng.IntN(3)]
		s.tracef("netfaults %v %v %v", s.net.drop, s.net.dup, s.net.maxDelay)
	case k < 77: // a client stops heartbeating for a while
		c := s.clients[s.rng.IntN(len(s.clients))]
		c.kaPausedUntil = s.now + int64(s.dur(500*time.Millisecond, 4*time.Second))
		s.stats.HBPauses++
	case k < 84: // a client pauses (GC) between its check and its write
		c := s.clients[s.rng.IntN(len(s.clients))]
		c.gcPause = true
		s.stats.GCPauses++
	case k < 87: // a member's raft clock runs slow for a while, often the leader's
		victim := s.peers[s.rng.IntN(len(s.peers))]
		if lead != 0 && s.rng.IntN(2) == 0 {
			victim = lead
		}
		m := s.nodes[victim]
		m.slowFactor = 2 + s.rng.IntN(4)
		m.slowUntil = s.now + int64(s.dur(200*time.Millisecond, 2*time.Second))
		s.stats.SlowClocks++
		s.tracef("slow clock %d x%d", victim, m.slowFactor)
	case k < 90: // a member's process pauses, often the leader's
		victim := s.peers[s.rng.IntN(len(s.peers))]
		if lead != 0 && s.rng.IntN(2) == 0 {
			victim = lead
		}
		m := s.nodes[victim]
		m.pausedUntil = max(m.pausedUntil, s.now+int64(s.dur(100*time.Millisecond, 2*time.Second)))
		s.stats.NodePauses++
		s.tracef("pause %d until %v", victim, time.Duration(m.pausedUntil))
	case s.cfg.DiskGuard && k < 98: // a data dir low on space for a while (instead of 8 heals in 10)
		s.fillDisk(lead)
	default: // heal the network
		s.healNet()
	}
	s.after(s.dur(50*time.Millisecond, 700*time.Millisecond), s.chaos)
}

func (s *Sim) healNet() {
	if len(s.net.cut) > 0 {
		s.stats.Heals++
	}
	clear(s.net.cut)
	s.tracef("heal")
}

// leader is the member that believes it leads with the highest term.
func (s *Sim) leader() uint64 {
	var best, term uint64
	for _, id := range s.peers {
		m := s.nodes[id]
		if m.up() && m.node.IsLeader() {
			if st := m.node.Status(); st.Term >= term {
				best, term = id, st.Term
			}
		}
	}
	return best
}

func sortedKeys[K interface{ ~uint64 | ~string }, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var _ = fsmpb.Error_ERROR_NONE
