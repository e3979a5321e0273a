package sim

import (
	"time"

	"github.com/batonlock/baton/internal/fsm"
)

// Skipping idle time in the calm. Once the chaos is over, a cluster whose
// members are all up and caught up, with nothing in flight, does nothing
// but tick and exchange heartbeats until the next timer of the leader's
// tracker (a session's expiry, a wait's timeout, a hold limit, the end of
// a lock-delay) or the next event that is not the cluster's own (a
// client's timeout, a restart, a fenced write). Those heartbeats are
// much of a scenario's work, and they test nothing the checkers look at.
//
// So at a leader's tick in such a state (after its tracker fired what was
// due, as at every tick), every member's raft clock stops until that next
// time: no member ticks, so no heartbeat is sent and no election timer
// runs, and each member's ticker resumes at its own phase. This is a run
// the product can have: every member process stopped for the same while
// (a paused member, Sim.chaos, for all of them at once), its ticks lost,
// its tracker's clock running on. The tracker then fires at the first
// tick at or after its deadline, as it would have without the stop, so
// sessions expire and lock-delays end at the virtual times they would
// have. The chaos is never skipped, nor any time with a fault, a message
// or a disk write in flight, a request open on a member, a membership
// change or a log version raise pending, or a member behind the leader's
// commit (a follower that lost its appends is found by heartbeats).

// idleSkips turns the skip on; TestIdleSkipKeepsDeadlines turns it off to
// compare.
var idleSkips = true

// minIdleSkip is the shortest stop worth making: a tick or two of
// heartbeats cost less than the look.
const minIdleSkip = 3 * tick

// skipIdle reports whether the leader lead, at its tick, stops every
// member's raft clock until the next thing to happen (its tracker's
// next deadline due, or the next event that is not routine, or the run's
// end); the leader then skips this tick too.
func (s *Sim) skipIdle(lead *member, due time.Time) bool {
	if !idleSkips || !s.calm || s.inFlight > 0 || s.leader() != lead.id || !s.idle(lead) {
		return false
	}
	until := s.end
	if !due.IsZero() {
		until = min(until, int64(due.Sub(epoch)))
	}
	for i := range s.q {
		if !s.q[i].routine {
			until = min(until, s.q[i].at)
		}
	}
	if until-s.now < int64(minIdleSkip) {
		return false
	}
	s.idleUntil = until
	s.tracef("idle until %v", time.Duration(until))
	return true
}

// idle reports whether the cluster led by lead has nothing under way but
// its ticks: every member up and running, no storage write or snapshot
// step pending, no proposal, read or wait of a request open, no
// membership change pending, the log at this release's version, and
// every member following lead in its term and applied up to its commit.
func (s *Sim) idle(lead *member) bool {
	if c := s.change; c != nil && !done(c.fut.Done()) && c.m.node == c.node {
		return false
	}
	if lead.node.LogVersion() != fsm.LogVersion {
		return false
	}
	ls := lead.node.Status()
	for _, id := range s.peers {
		m := s.nodes[id]
		if !m.up() || s.now < m.pausedUntil || m.writing || m.snapshotting ||
			m.node.PendingWrites() || m.node.SnapshotPending() ||
			len(m.srv.props) > 0 || len(m.srv.reads) > 0 || len(m.srv.expect) > 0 {
			return false
		}
		if st := m.node.Status(); st.Leader != lead.id || st.Term != ls.Term || st.Applied != ls.Commit {
			return false
		}
	}
	return true
}

// nextTickAfterIdle is the delay from now to a member's first tick at or
// after the end of an idle stop, keeping the member's phase.
func (s *Sim) nextTickAfterIdle() time.Duration {
	ticks := (s.idleUntil - s.now + int64(tick) - 1) / int64(tick)
	return time.Duration(ticks) * tick
}
