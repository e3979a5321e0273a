package sim

import (
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/raftnode"
)

// settleEvery is how often the calm looks whether the run has settled.
const settleEvery = 20 * time.Millisecond

// heal ends the chaos: the network is repaired, every member restarted,
// clients stop; the calm phase lets sessions expire and members converge.
func (s *Sim) heal() {
	s.calm = true
	s.healNet()
	s.net.drop, s.net.dup, s.net.maxDelay = 0, 0, 5*time.Millisecond
	for _, id := range s.peers {
		m := s.nodes[id]
		m.disk.tearNext = 0
		m.pausedUntil, m.slowUntil, m.diskLowUntil = 0, 0, 0
		if m.reads < fsm.LogVersion && !m.retired {
			if m.up() {
				m.down() // a clean stop: the disk keeps what it has
			}
			m.upgrade()
		}
		if !m.up() {
			m.start()
		}
	}
	s.afterRoutine(settleEvery, s.settle)
}

// settle ends the calm, and the run goes to its final checks, once
// nothing is left to happen but the cluster's own ticks and heartbeats:
// Config.Calm is then only the longest a calm may take. The run must
// have been quiet at two looks in a row with the same leader, term and
// commit index: a leader commits nothing of its term (not even its own
// first entry) in that time only if it has nothing left to commit.
func (s *Sim) settle() {
	st, ok := s.quiet()
	if ok && st == s.lastQuiet {
		s.settled = true
		s.tracef("settled")
		return
	}
	s.lastQuiet = raftnode.Status{}
	if ok {
		s.lastQuiet = st
	}
	s.afterRoutine(settleEvery, s.settle)
}

// quiet reports whether the run has come to rest, with the leader's
// status: every event scheduled but the routine ones has happened (each
// request and its answer, each timeout, retry, fenced write, restart,
// and every event a pause held back); the leader's state has no session
// left, so every session has expired or closed and nothing is held or
// awaited; no member has a proposal, read or wait of a request open; no
// membership change is pending; and every member of the group is up
// and has applied all that the leader has committed, at this release's
// log version. From there on a run only ticks and sends heartbeats,
// until Config.Calm's end, and its final checks would see what they see
// now.
func (s *Sim) quiet() (raftnode.Status, bool) {
	if s.pending > 0 {
		return raftnode.Status{}, false
	}
	if c := s.change; c != nil && !done(c.fut.Done()) && c.m.node == c.node {
		return raftnode.Status{}, false
	}
	for _, id := range s.peers {
		if m := s.nodes[id]; m.up() && (len(m.srv.props) > 0 || len(m.srv.reads) > 0 || len(m.srv.expect) > 0) {
			return raftnode.Status{}, false
		}
	}
	lead := s.leader()
	if lead == 0 {
		return raftnode.Status{}, false
	}
	l := s.nodes[lead].node
	if l.LogVersion() != fsm.LogVersion {
		return raftnode.Status{}, false
	}
	sessions := 0
	l.View(func(fm *fsm.Machine) { sessions = fm.NumSessions() })
	if sessions > 0 {
		return raftnode.Status{}, false
	}
	st := l.Status()
	group := l.Membership()
	for _, ids := range [][]uint64{group.Voters, group.Learners} {
		for _, id := range ids {
			m := s.nodes[id]
			if m == nil || !m.up() || m.node.Status().Applied != st.Commit {
				return raftnode.Status{}, false
			}
		}
	}
	return st, true
}
