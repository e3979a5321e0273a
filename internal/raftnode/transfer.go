package raftnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3/tracker"
)

// ErrTransferFailed: leadership did not move within the time a transfer
// has (etcd's raft gives one up after an election timeout).
var ErrTransferFailed = errors.New("raftnode: leadership transfer did not complete")

// ErrNoTransferee: the transfer names no voter that could take over (this
// member itself, a learner, one not in the group), or the group has no
// other voter.
var ErrNoTransferee = errors.New("raftnode: no member to hand leadership to")

// transferQuery asks the loop to start handing leadership to a member.
type transferQuery struct {
	to     uint64 // 0: the most caught-up voter
	chosen uint64
	err    error
	done   chan struct{}
}

// TransferLeadership hands this node's leadership to voter to, or, when
// to is 0, to the voter whose log matches the leader's furthest (the one
// that can take over soonest), and waits until that member leads. The
// leader first brings the transferee's log up to its own, then tells it to
// campaign at once, so no member waits for an election timeout; proposals
// are refused meanwhile (clients retry them). It returns the member that
// leads afterwards. On a follower it fails with *NotLeaderError.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) (uint64, error) {
	if n.manual {
		return 0, errors.New("raftnode: TransferLeadership needs the Ready loop")
	}
	q := &transferQuery{to: to, done: make(chan struct{})}
	select {
	case n.transferC <- q:
	case <-n.doneC:
		return 0, ErrStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-q.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if q.err != nil {
		return 0, q.err
	}
	// etcd's raft abandons a transfer that has not completed within an
	// election timeout; wait twice that for the transferee to win.
	limit := time.NewTimer(2 * time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval)
	defer limit.Stop()
	poll := time.NewTicker(n.cfg.TickInterval)
	defer poll.Stop()
	for {
		if lead := n.leader.Load(); lead == q.chosen {
			return lead, nil
		}
		select {
		case <-poll.C:
		case <-limit.C:
			return n.leader.Load(), fmt.Errorf("%w: member %x does not lead after two election timeouts (member %x does)", ErrTransferFailed, q.chosen, n.leader.Load())
		case <-n.doneC:
			return 0, ErrStopped
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// startTransfer (on the loop) picks the transferee and starts the
// transfer.
func (n *Node) startTransfer(q *transferQuery) {
	defer close(q.done)
	if !n.wasLeader {
		q.err = &NotLeaderError{Leader: n.leader.Load()}
		return
	}
	st := n.rn.Status()
	voter := func(id uint64) bool {
		pr, ok := st.Progress[id]
		return ok && !pr.IsLearner && id != n.cfg.ID
	}
	switch {
	case q.to == n.cfg.ID:
		q.err = fmt.Errorf("%w: member %x leads already", ErrNoTransferee, q.to)
		return
	case q.to != 0 && !voter(q.to):
		q.err = fmt.Errorf("%w: member %x is not a voter of the group", ErrNoTransferee, q.to)
		return
	case q.to != 0:
		q.chosen = q.to
	default:
		ids := make([]uint64, 0, len(st.Progress))
		for id := range st.Progress {
			if voter(id) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			q.err = fmt.Errorf("%w: the group has no other voter", ErrNoTransferee)
			return
		}
		// The furthest match; among equals, one that is replicating, then
		// the lowest id (the same choice for the same state).
		slices.SortFunc(ids, func(a, b uint64) int {
			pa, pb := st.Progress[a], st.Progress[b]
			switch {
			case pa.Match != pb.Match:
				return cmpDesc(pa.Match, pb.Match)
			case (pa.State == tracker.StateReplicate) != (pb.State == tracker.StateReplicate):
				if pa.State == tracker.StateReplicate {
					return -1
				}
				return 1
			}
			return cmpDesc(b, a)
		})
		q.chosen = ids[0]
	}
	n.log.Info("transferring leadership", "to", fmt.Sprintf("%x", q.chosen), "match", st.Progress[q.chosen].Match, "commit", st.Commit)
	n.rn.TransferLeader(q.chosen)
}

// cmpDesc orders a before b when a is larger.
func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
