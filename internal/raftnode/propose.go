package raftnode

// Proposals and read barriers: how the API hands commands to the loop and
// waits for their results, and how it waits for linearizable reads.

import (
	"context"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Propose replicates cmd and waits until it is applied, returning its
// result and log index. It sets cmd's Proposer and ProposalId. Cancelling
// ctx stops the waiting, not the proposal: the command may still apply.
func (n *Node) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, uint64, error) {
	f, err := n.Submit(cmd)
	if err != nil {
		return nil, 0, err
	}
	return f.Wait(ctx)
}

// Future is a submitted proposal.
type Future struct {
	n *Node
	p *proposal
}

// Done is closed when the proposal applied or failed.
func (f *Future) Done() <-chan struct{} { return f.p.done }

// Wait waits for the proposal's result and log index. Cancelling ctx
// stops the waiting, not the proposal.
func (f *Future) Wait(ctx context.Context) (*fsmpb.Result, uint64, error) {
	select {
	case <-f.p.done:
		return f.p.res, f.p.index, f.p.err
	case <-ctx.Done():
		f.n.forget(f.p.id)
		return nil, 0, ctx.Err()
	}
}

// Submit queues cmd for replication without waiting. Commands submitted
// from one goroutine enter the log in submission order (unless dropped by a
// leadership change, which fails their futures).
func (n *Node) Submit(cmd *fsmpb.Command) (*Future, error) {
	p, err := n.submit(cmd, &proposal{done: make(chan struct{})})
	if err != nil {
		return nil, err
	}
	return &Future{n: n, p: p}, nil
}

// SubmitFunc queues cmd as Submit does and calls done once with its
// outcome (as Future.Wait returns it), instead of handing out a future: a
// caller with many requests in flight needs no goroutine per request.
// done runs on the Ready loop's goroutine (or Stop's), so it must return
// quickly and must not call the Node's blocking methods. When SubmitFunc
// returns an error, done is never called.
func (n *Node) SubmitFunc(cmd *fsmpb.Command, done func(res *fsmpb.Result, index uint64, err error)) error {
	return n.SubmitTo(cmd, completeFunc(done))
}

// Completer is told the outcome of a command given to SubmitTo.
type Completer interface {
	Complete(res *fsmpb.Result, index uint64, err error)
}

type completeFunc func(res *fsmpb.Result, index uint64, err error)

func (f completeFunc) Complete(res *fsmpb.Result, index uint64, err error) { f(res, index, err) }

// SubmitTo is SubmitFunc for a caller that keeps what it needs to answer
// in a value of its own: c.Complete is called as done would be. A server
// with a request in flight per session pays one allocation for it, where
// closures over the request cost several.
func (n *Node) SubmitTo(cmd *fsmpb.Command, c Completer) error {
	_, err := n.submit(cmd, &proposal{cb: c})
	return err
}

func (n *Node) submit(cmd *fsmpb.Command, p *proposal) (*proposal, error) {
	if !n.isLeader.Load() {
		return nil, &NotLeaderError{Leader: n.leader.Load()}
	}
	p.id = n.nextID.Add(1)
	if v := n.logVersion.Load(); v < fsm.LogVersion && cmd.GetSetLogVersion() == nil {
		if need := fsm.VersionNeeded(cmd); need > v {
			// Some member may not read what this release would write.
			// A new leader may not have applied the entry that raised
			// the version (an earlier attempt of this very request may
			// have applied after it), and a raise may be on its way:
			// then the caller retries, here.
			if !n.caughtUp.Load() {
				return nil, &NotLeaderError{Leader: n.cfg.ID}
			}
			// A member not heard from yet (a new cluster's, at its
			// first election) may be about to say it reads the version:
			// for a while the caller retries rather than lose what
			// the command carries (an open's secret).
			if due := n.cfg.LogVersionDue; due != nil {
				dv, ok := due(n.Membership())
				if ok && dv >= need || !ok && n.ledTicks.Load() < int64(versionGraceElections*n.cfg.ElectionTicks) {
					return nil, &NotLeaderError{Leader: n.cfg.ID}
				}
			}
			if err := fsm.ForLogVersion(cmd, v); err != nil {
				// Refused once the log has settled the request's seq
				// (fsm.SeqFence). The fence cannot find an earlier
				// attempt applied: one that applied was submitted at a
				// version that carries it, and a caught-up leader's
				// version never falls below that.
				refusal := fmt.Errorf("%w: %v", ErrLogVersion, err)
				fence, ok := n.fence(cmd, p, refusal)
				if !ok {
					return nil, refusal
				}
				cmd = fence
			}
		}
	}
	cmd.Proposer = n.cfg.ID
	cmd.ProposalId = p.id
	data, ok := fsm.EncodeCommand(cmd)
	if !ok {
		var err error
		if data, err = proto.Marshal(cmd); err != nil {
			return nil, fmt.Errorf("raftnode: encode command: %w", err)
		}
	}
	p.data = data
	markDeferrable(p, cmd)
	n.wmu.Lock()
	n.waiting[p.id] = p
	n.wmu.Unlock()
	// A loop that has ended (Stop, or a storage error) fails everything
	// in waiting once, after setting dead: checking dead after joining
	// waiting means either that sweep completes p or we see dead here.
	if n.dead.Load() {
		return n.refuse(p, ErrStopped)
	}
	select {
	case n.propC <- p:
		return p, nil
	case <-n.stopC:
		return n.refuse(p, ErrStopped)
	default:
		return n.refuse(p, ErrOverloaded)
	}
}

// Refuse answers cmd, a request this member refuses before proposing it,
// with refusal once the log has settled cmd's sequence (fsm.SeqFence): an
// earlier attempt of it can no longer apply. If an earlier attempt did
// apply first, it returns a NotLeaderError naming this member: the
// caller's retry is answered from the cache; if the log refused the
// sequence itself (stale, a session gone), that *fsm.Error. A command
// without a sequence to settle gets refusal at once. Cancelling ctx stops
// the waiting, not the fence. Submit's refusals for the log version are
// settled alike, and complete the same ways.
func (n *Node) Refuse(ctx context.Context, cmd *fsmpb.Command, refusal error) error {
	f, err := n.SubmitRefusal(cmd, refusal)
	if err != nil {
		return err
	}
	_, _, err = f.Wait(ctx)
	return err
}

// SubmitRefusal is Refuse without the waiting, for a caller that drives
// the loop itself (StartManual): it queues the seq fence of cmd's
// refusal and returns its future, whose Wait returns a nil result and
// what Refuse would. A command without a sequence to settle gets
// refusal at once, as the error.
func (n *Node) SubmitRefusal(cmd *fsmpb.Command, refusal error) (*Future, error) {
	p := &proposal{done: make(chan struct{})}
	fence, ok := n.fence(cmd, p, refusal)
	if !ok {
		return nil, refusal
	}
	p, err := n.submit(fence, p)
	if err != nil {
		return nil, err
	}
	return &Future{n: n, p: p}, nil
}

// fence makes p the seq fence for cmd's refusal, and returns the fence to
// propose; false when cmd has no sequence to settle (then refusal is
// answered at once). The fence shows cmd's secret hash and principal,
// which a cluster below their log versions (3 and 4) does not carry:
// they are left out of it, as submit leaves them out of any command
// (fsm.ForLogVersion), so that every log version carries the fence:
// Refuse's cmd has not been through submit.
func (n *Node) fence(cmd *fsmpb.Command, p *proposal, refusal error) (*fsmpb.Command, bool) {
	fence := fsm.SeqFence(cmd)
	if fence == nil || fsm.ForLogVersion(fence, n.logVersion.Load()) != nil {
		return nil, false
	}
	p.fence = &fenced{refusal: refusal, leader: n.cfg.ID}
	return fence, true
}

// refuse takes p back out of waiting and returns err; but if someone else
// took it first (failAll), p is theirs to complete, and it counts as
// submitted.
func (n *Node) refuse(p *proposal, err error) (*proposal, error) {
	if !n.forget(p.id) {
		return p, nil
	}
	return nil, err
}

// ReadBarrier returns once this node has confirmed with a quorum that it
// still leads, at a moment after the call began, and has applied every
// entry committed before that moment: state read from View afterwards is
// linearizable. Concurrent barriers share one ReadIndex round.
func (n *Node) ReadBarrier(ctx context.Context) error {
	r, err := n.StartRead()
	if err != nil {
		return err
	}
	select {
	case <-r.Done():
		return r.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReadFuture is a read barrier started by StartRead.
type ReadFuture struct{ r *readWait }

// Done is closed when the barrier passed or failed.
func (f *ReadFuture) Done() <-chan struct{} { return f.r.done }

// Err is the barrier's outcome once Done is closed: nil when state read
// from View now is linearizable (as for ReadBarrier).
func (f *ReadFuture) Err() error { return f.r.err }

// StartRead queues a read barrier without waiting for it; ReadBarrier is
// StartRead followed by a wait on the future.
func (n *Node) StartRead() (*ReadFuture, error) {
	if !n.isLeader.Load() {
		return nil, &NotLeaderError{Leader: n.leader.Load()}
	}
	r := &readWait{done: make(chan struct{})}
	select {
	case n.readC <- r:
		return &ReadFuture{r: r}, nil
	case <-n.stopC:
		return nil, ErrStopped
	default:
		return nil, ErrOverloaded
	}
}

// forget removes proposal id from waiting and reports whether it was
// there.
func (n *Node) forget(id uint64) bool {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	_, ok := n.waiting[id]
	delete(n.waiting, id)
	return ok
}

// stepProposals steps the held proposals, first and every proposal
// already queued behind it into raft as one MsgProp, unless they may all
// wait for the next one (defer.go).
func (n *Node) stepProposals(first *proposal) {
	held := len(n.deferral.held)
	batch := append(n.deferral.held, first)
	n.deferral.held = nil
	for len(batch) < n.cfg.MaxBatch {
		select {
		case p := <-n.propC:
			batch = append(batch, p)
			continue
		default:
		}
		break
	}
	if n.deferrable(batch) {
		n.hold(batch, held)
		return
	}
	n.stopHeldTimer()
	n.stepBatch(batch)
}

// stepBatch steps batch into raft as one MsgProp.
func (n *Node) stepBatch(batch []*proposal) {
	// Raft appends clones of the entries: one block holds them all.
	ents, blk := make([]*raftpb.Entry, len(batch)), make([]raftpb.Entry, len(batch))
	for i, p := range batch {
		blk[i].Data = p.data
		ents[i] = &blk[i]
	}
	err := n.rn.Step(&raftpb.Message{Type: new(raftpb.MsgProp), From: new(n.cfg.ID), Entries: ents})
	n.metrics.Proposals += uint64(len(batch))
	n.metrics.ProposeBatches++
	if err != nil {
		// Dropped: not leader any more, or the uncommitted log is full.
		// Nothing was appended, so the outcome is known: not applied.
		var perr error = &NotLeaderError{Leader: n.rn.BasicStatus().Lead}
		if n.rn.BasicStatus().RaftState == raft.StateLeader {
			perr = ErrOverloaded
		}
		for _, p := range batch {
			n.finish(p.id, nil, 0, perr)
		}
		n.flushObserver()
	}
}
