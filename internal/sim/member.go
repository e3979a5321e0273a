package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/raftnode"
)

// member is one Baton member: its disk survives crashes, its node, tracker
// and server state do not.
type member struct {
	s    *Sim
	id   uint64
	disk *disk
	inc  int // incarnation

	node *raftnode.Node // nil while down
	// join: the member was added to a running group (it starts with an
	// empty log and waits for the leader's); retired: it stopped because
	// it was removed, for good.
	join, retired bool
	// pausedUntil: the process is stopped (a long GC pause, SIGSTOP):
	// events for it wait, its ticks are lost.
	pausedUntil int64
	// slowUntil/slowFactor: the member's ticker fires slowFactor times
	// slower (a starved or throttled process: raft time runs slow).
	slowUntil  int64
	slowFactor int
	// diskLowUntil: the data dir has less free space than the disk
	// guard's minimum (Config.DiskGuard, space.go); it outlives crashes.
	diskLowUntil int64
	tracker      *liveness.Tracker
	srv          *server
	// writing: a write of the node's storage work is under way on the
	// simulated disk; it completes (Persist) after the disk's latency.
	writing bool
	// snapshotting: the node's snapshot completes (FinishSnapshot) later.
	snapshotting bool
	// reads is the log version of the member's release (Config.Upgrade);
	// heard, what the members that sent to this process said they read.
	reads uint32
	heard map[uint64]uint32
}

func (m *member) up() bool { return m.node != nil }

// deferred reports whether the member is paused, and if so queues fn for
// when it resumes (in arrival order).
func (m *member) deferred(fn func()) bool {
	if m.s.now >= m.pausedUntil {
		return false
	}
	m.s.at(m.pausedUntil, fn)
	return true
}

func (m *member) start() {
	s := m.s
	m.inc++
	m.writing, m.snapshotting = false, false
	cfg := raftnode.DefaultConfig()
	cfg.ID = m.id
	cfg.Peers = s.initial
	cfg.Join = m.join
	cfg.Store = m.disk
	rec, err := m.disk.recovered()
	if err != nil {
		s.fail("restart", "member %d cannot open its log: %v", m.id, err)
		return
	}
	cfg.Recovered = rec
	cfg.Transport = &m.s.net
	cfg.TickInterval = tick
	cfg.ElectionTicks = electionTicks
	cfg.HeartbeatTicks = heartbeatTicks
	cfg.SnapshotEntries = 8
	// Proposals, reads and peer messages wait in the node's queues only
	// until the next loop turn, which every request's and message's
	// arrival runs: a few dozen at most here (a new leader's tracker
	// expiring every session at once). The default bounds (65,536
	// proposals and reads, 8,192 messages) would allocate and clear over
	// 1 MiB at every start and restart.
	cfg.MaxInFlight = 1024
	cfg.MaxInbound = 1024
	cfg.ProposalIDBase = uint64(s.Now().UnixNano())
	cfg.LogVersion = m.reads
	cfg.LogVersionDue = m.logVersionDue
	m.heard = make(map[uint64]uint32)
	srv := &server{m: m, expect: make(map[waitID]*expectation)}
	cfg.Observer = srv
	m.srv = srv
	m.tracker = liveness.NewManual(simProposer{srv}, nil, s.Now)
	n, err := raftnode.StartManual(cfg)
	if err != nil {
		s.fail("restart", "member %d cannot restart from its disk: %v", m.id, err)
		return
	}
	m.node = n
	s.tracef("start %d inc %d", m.id, m.inc)
	m.pump()
}

// crash drops the process: the node is abandoned without Stop, the page
// cache lost.
func (m *member) crash() {
	if !m.up() {
		return
	}
	torn := m.disk.crash(m.s.rng)
	if torn {
		m.s.stats.TornWrites++
	}
	m.down()
}

func (m *member) down() {
	m.s.stats.Crashes++
	m.s.stats.ProposalsDeferred += m.node.Metrics().Deferred
	m.s.tracef("crash %d", m.id)
	m.node = nil
	m.tracker = nil
	m.srv.dead = true
	m.srv = nil
}

func (m *member) scheduleTick(d time.Duration) {
	m.s.afterRoutine(d, func() {
		if m.up() && m.s.now >= m.pausedUntil && m.s.now >= m.s.idleUntil {
			due := m.tracker.FireDue(ctxBackground)
			if m.up() && !m.s.skipIdle(m, due) {
				if err := m.node.Tick(); err != nil {
					m.failed()
				} else {
					m.pump()
				}
			}
		}
		next := tick
		if m.s.now < m.slowUntil {
			next *= time.Duration(m.slowFactor)
		}
		if m.s.now < m.s.idleUntil {
			next = m.s.nextTickAfterIdle()
		}
		m.scheduleTick(next)
	})
}

// failed handles a node that stopped on a storage error: the machine
// crashed mid-write; restart it later from what its disk kept.
func (m *member) failed() {
	if errors.Is(m.node.Err(), raftnode.ErrRemoved) {
		m.retire()
		return
	}
	if errors.Is(m.node.Err(), raftnode.ErrAboveLogVersion) {
		m.s.fail("v/stopped", "member %d, reading log version %d: %v", m.id, m.reads, m.node.Err())
		return
	}
	if m.disk.tore {
		m.disk.tore = false
		m.s.stats.TornWrites++
	}
	m.disk.crash(m.s.rng)
	m.down()
	m.s.after(m.s.dur(50*time.Millisecond, 500*time.Millisecond), m.restart)
}

// retire stops a member that was removed from the group, for good.
func (m *member) retire() {
	s := m.s
	s.stats.Retired++
	s.tracef("retired %d", m.id)
	m.retired = true
	m.node, m.tracker = nil, nil
	m.srv.dead = true
	m.srv = nil
	s.peers = slices.DeleteFunc(s.peers, func(id uint64) bool { return id == m.id })
}

func (m *member) restart() {
	if !m.up() && !m.retired {
		if m.reads < fsm.LogVersion && m.s.rng.IntN(2) == 0 {
			m.upgrade()
		}
		m.start()
	}
}

// upgrade puts the member, down, on this release.
func (m *member) upgrade() {
	m.reads = fsm.LogVersion
	m.s.stats.Upgrades++
	m.s.tracef("upgrade %d", m.id)
}

// pump runs the node's loop until it has nothing left to do, then lets
// the server answer what completed and checks the member's state.
func (m *member) pump() {
	for m.up() {
		did, err := m.node.Pump()
		if err != nil {
			m.failed()
			return
		}
		if !did {
			break
		}
	}
	if !m.up() {
		return
	}
	m.startWrite()
	m.startSnapshot()
	m.srv.poll()
	if m.srv.dirty {
		m.srv.dirty = false
		m.s.chk.checkMember(m)
	}
}

// startWrite begins the disk write of the storage work the node handed
// over, if any and none is under way. It completes after a disk latency,
// while the node goes on stepping messages and proposals (raft's
// asynchronous storage writes); a crash meanwhile loses it.
func (m *member) startWrite() {
	if m.writing || !m.node.PendingWrites() {
		return
	}
	m.writing = true
	node := m.node
	m.s.afterRoutine(m.s.dur(50*time.Microsecond, 3*time.Millisecond), func() {
		if m.node != node {
			return // crashed meanwhile: the write never happened
		}
		if m.deferred(func() { m.finishWrite(node) }) {
			return
		}
		m.finishWrite(node)
	})
}

// startSnapshot lets the next step of the snapshot the node took, its
// encoding or its save, complete after a while, as each takes time off
// the loop in a real member (pump starts the next). The state machine
// was frozen when the snapshot was taken and goes on applying through
// both steps, so the encoding is of a state applies have moved past
// meanwhile; a crash loses the snapshot, not what was committed.
func (m *member) startSnapshot() {
	if m.snapshotting || !m.node.SnapshotPending() {
		return
	}
	m.snapshotting = true
	node := m.node
	m.s.afterRoutine(m.s.dur(100*time.Microsecond, 20*time.Millisecond), func() {
		if m.node != node {
			return // crashed meanwhile
		}
		if m.deferred(func() { m.finishSnapshot(node) }) {
			return
		}
		m.finishSnapshot(node)
	})
}

func (m *member) finishSnapshot(node *raftnode.Node) {
	if m.node != node {
		return
	}
	m.snapshotting = false
	node.FinishSnapshot()
	m.pump()
}

func (m *member) finishWrite(node *raftnode.Node) {
	if m.node != node {
		return
	}
	m.writing = false
	if err := node.Persist(); err != nil {
		m.failed()
		return
	}
	m.pump()
}

// deliver steps a message into member to and runs its loop.
func (m *member) deliver(msg *raftpb.Message) {
	if !m.up() || m.deferred(func() { m.deliver(msg) }) {
		return
	}
	if from := msg.GetFrom(); m.hasRemoved(from) {
		// The transport's answer to a removed member: it stops.
		m.s.tellRemoved(from)
		return
	}
	m.node.Step(msg)
	m.pump()
}

// hasRemoved reports whether m applied the removal of member id.
func (m *member) hasRemoved(id uint64) bool {
	for _, mb := range m.node.Membership().Members {
		if mb.ID == id {
			return mb.Removed
		}
	}
	return false
}

// tellRemoved delivers the notice that member id was removed.
func (s *Sim) tellRemoved(id uint64) {
	s.after(s.dur(s.net.minDelay, s.net.maxDelay), func() {
		m := s.nodes[id]
		var tell func()
		tell = func() {
			if !m.up() || m.deferred(tell) {
				return
			}
			s.tracef("removal notice to %d", id)
			m.node.StopRemoved()
			m.pump()
		}
		tell()
	})
}

// pendingChange is a membership change proposed on a leader.
type pendingChange struct {
	m    *member
	node *raftnode.Node
	fut  *raftnode.ConfFuture
	desc string
	at   int64
}

// pollChange forgets the pending change once it is answered, or once
// nobody can answer it (its proposer crashed) or it is old: the next
// change may then find it still pending, which raft refuses.
func (s *Sim) pollChange() {
	c := s.change
	if c == nil {
		return
	}
	select {
	case <-c.fut.Done():
		err := c.fut.Err()
		s.tracef("membership %s: %v", c.desc, err)
		if err == nil {
			s.stats.MembersApplied++
		}
		s.change = nil
		return
	default:
	}
	if c.m.node != c.node || s.now-c.at > int64(3*time.Second) {
		s.change = nil
	}
}

// changeMembership proposes a membership change on the leader: add a
// member (as a learner or a voter), promote a learner, or remove a
// member, the leader included, leaving at least two voters.
func (s *Sim) changeMembership() {
	s.pollChange()
	lead := s.leader()
	if s.change != nil || lead == 0 {
		return
	}
	l := s.nodes[lead]
	ms := l.node.Membership()
	var choices []func() (*raftpb.ConfChange, string)
	if len(ms.Learners) > 0 {
		choices = append(choices, func() (*raftpb.ConfChange, string) {
			id := ms.Learners[s.rng.IntN(len(ms.Learners))]
			return &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(id)}, fmt.Sprintf("promote %d", id)
		})
	}
	if len(ms.Voters)+len(ms.Learners) < 6 && s.added < 3 {
		choices = append(choices, func() (*raftpb.ConfChange, string) {
			id := slices.Max(sortedKeys(s.nodes)) + 1
			m := &member{s: s, id: id, disk: &disk{}, join: true, reads: fsm.LogVersion}
			s.nodes[id] = m
			s.peers = append(s.peers, id)
			s.added++
			m.start()
			m.scheduleTick(time.Duration(s.rng.Int64N(int64(tick))))
			typ, what := raftpb.ConfChangeAddNode, "voter"
			if s.rng.IntN(2) == 0 {
				typ, what = raftpb.ConfChangeAddLearnerNode, "learner"
			}
			return &raftpb.ConfChange{Type: typ.Enum(), NodeId: new(id)}, fmt.Sprintf("add %s %d", what, id)
		})
	}
	if len(ms.Voters) >= 3 {
		choices = append(choices, func() (*raftpb.ConfChange, string) {
			all := append(slices.Clone(ms.Voters), ms.Learners...)
			id := all[s.rng.IntN(len(all))]
			return &raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(id)}, fmt.Sprintf("remove %d", id)
		})
	}
	if len(choices) == 0 {
		return
	}
	cc, desc := choices[s.rng.IntN(len(choices))]()
	if !l.up() {
		return // (starting a new member cannot stop the leader; defensive)
	}
	fut, err := l.node.ProposeMembership(cc)
	if err != nil {
		s.tracef("membership %s on %d: %v", desc, lead, err)
		return
	}
	s.stats.MemberChanges++
	s.tracef("membership %s proposed on %d", desc, lead)
	s.change = &pendingChange{m: l, node: l.node, fut: fut, desc: desc, at: s.now}
	l.pump()
}
