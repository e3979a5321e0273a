package raftnode

import (
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// A waiting acquire that will queue behind others (a contended lock's
// next waiter) is answered QUEUED and granted only later, by another
// entry: nobody waits on its quick commit. Proposed alone it costs a log
// write of its own on every member, and the release that hands the lock
// on, arriving a moment later, waits behind that write. So the leader
// holds such proposals back for at most maxDeferral, until the next
// proposal comes, and they go into the log with it, in one write.
//
// The log keeps the order in which proposals reached the loop: held
// proposals are stepped before anything that came after them. A held
// proposal is still waiting (Node.waiting): a leader that steps down fails
// it with the others, and drops it.

// maxDeferral bounds how long a proposal is held back for company. A
// contended lock's next release usually comes well within it.
const maxDeferral = time.Millisecond

// deferral holds proposals back (only the Ready loop touches it).
type deferral struct {
	held  []*proposal
	timer *time.Timer
	// c fires when the held proposals' time is up; nil while none are
	// held. In manual mode the next Tick steps them instead.
	c <-chan time.Time
}

// markDeferrable notes on p what makes it deferrable: cmd is an acquire
// that waits (whether it will queue is decided on the loop, as it steps).
func markDeferrable(p *proposal, cmd *fsmpb.Command) {
	if a := cmd.GetAcquire(); a != nil && a.GetWait() {
		p.waitLock, p.waitSession = a.GetLock(), cmd.GetSessionId()
	}
}

// deferrable reports whether every proposal of batch may wait: each is a
// waiting acquire of a lock that has waiters and no hold of its session,
// so applied now it would queue. Applied state only: an entry in flight
// may change that, and then the proposal merely waited a moment.
func (n *Node) deferrable(batch []*proposal) bool {
	if len(batch) >= n.cfg.MaxBatch {
		return false
	}
	for _, p := range batch {
		if p.waitLock == "" || !n.m.WouldQueue(p.waitLock, p.waitSession) {
			return false
		}
	}
	return true
}

// hold keeps batch back, whose first held proposals were held already,
// until the next proposal that may not wait, or until maxDeferral after
// the first of them was held.
func (n *Node) hold(batch []*proposal, held int) {
	d := &n.deferral
	d.held = batch
	n.metrics.Deferred += uint64(len(batch) - held)
	if d.c != nil || n.manual {
		return
	}
	if d.timer == nil {
		d.timer = time.NewTimer(maxDeferral)
	} else {
		d.timer.Reset(maxDeferral)
	}
	d.c = d.timer.C
}

// takeHeld returns the held proposals, oldest first, and stops their
// timer.
func (n *Node) takeHeld() []*proposal {
	held := n.deferral.held
	n.deferral.held = nil
	n.stopHeldTimer()
	return held
}

func (n *Node) stopHeldTimer() {
	if d := &n.deferral; d.c != nil {
		d.timer.Stop()
		d.c = nil
	}
}

// stepHeld steps the held proposals on their own: their time is up (or,
// in manual mode, a tick came).
func (n *Node) stepHeld() {
	if held := n.takeHeld(); len(held) > 0 {
		n.stepBatch(held)
	}
}

// dropHeld forgets the held proposals of a leader that stepped down: it
// failed them already (failAll), and must not propose them now.
func (n *Node) dropHeld() {
	n.takeHeld()
}
