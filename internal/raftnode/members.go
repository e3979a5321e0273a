package raftnode

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

var (
	// ErrConfChangePending: raft refused a membership change because an
	// earlier one is not applied yet (one at a time); nothing changed.
	ErrConfChangePending = errors.New("raftnode: another membership change is still being applied; try again")
	// ErrRemoved is why a node stops (Err) once it applied its own removal
	// from the group.
	ErrRemoved = errors.New("raftnode: this member was removed from the cluster")
)

// Membership is the group's configuration as this node applied it: the
// Raft ids of its voters and learners, and every member the log (or a
// snapshot) recorded with its name and peer address.
type Membership struct {
	Voters, Learners []uint64
	Members          []fsm.Member
	// ClusterID identifies the cluster (from its bootstrap), 0 if unknown.
	ClusterID uint64
}

// Has reports whether id is a voter or a learner.
func (m Membership) Has(id uint64) bool {
	return slices.Contains(m.Voters, id) || slices.Contains(m.Learners, id)
}

// MemberContext encodes a member's name and peer address for the context
// of the ConfChange that adds it, and for a new group's bootstrap also the
// cluster's id (0 otherwise).
func MemberContext(name, peerAddr string, clusterID uint64) []byte {
	b, _ := proto.Marshal(&fsmpb.Member{Name: name, PeerAddr: peerAddr, ClusterId: clusterID})
	return b
}

// MembersLogVersion is the log version a leader may raise the cluster's
// to: the lowest of what it reads (own) and what every other voter and
// learner of ms said it reads (heard). ok is false while one of them has
// not been heard from.
func MembersLogVersion(ms Membership, self uint64, own uint32, heard func(id uint64) (uint32, bool)) (v uint32, ok bool) {
	v = own
	for _, ids := range [][]uint64{ms.Voters, ms.Learners} {
		for _, id := range ids {
			if id == self {
				continue
			}
			hv, ok := heard(id)
			if !ok {
				return 0, false
			}
			v = min(v, hv)
		}
	}
	return v, true
}

// confWait is a membership change waiting for its entry to apply.
type confWait struct {
	cc       *raftpb.ConfChange
	done     chan struct{}
	err      error
	proposed bool // stepped into raft; the next Ready must carry it
	accepted bool // its entry is in the log
}

func (w *confWait) finish(err error) {
	w.err = err
	close(w.done)
}

// Membership returns the configuration as of the last applied entry.
func (n *Node) Membership() Membership {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.membership
}

// ChangeMembership proposes cc (AddNode, AddLearnerNode or RemoveNode) on
// the leader and returns once it applied here. The caller checks it
// against Membership first: raft panics on a change that would leave no
// voter. It fails with a *NotLeaderError on a follower, ErrConfChangePending
// while another change is unapplied, and ErrOutcomeUnknown if leadership
// was lost before it applied.
func (n *Node) ChangeMembership(ctx context.Context, cc *raftpb.ConfChange) error {
	if n.manual {
		return errors.New("raftnode: membership changes need the Ready loop")
	}
	cc = proto.Clone(cc).(*raftpb.ConfChange)
	cc.Id = new(n.nextID.Add(1))
	w := &confWait{cc: cc, done: make(chan struct{})}
	select {
	case n.confC <- w:
	case <-n.doneC:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ConfFuture is a membership change proposed in manual mode.
type ConfFuture struct{ w *confWait }

// Done is closed once the change applied here or failed.
func (f *ConfFuture) Done() <-chan struct{} { return f.w.done }

// Err is the change's outcome once Done is closed (nil: applied), as
// ChangeMembership would return it.
func (f *ConfFuture) Err() error {
	select {
	case <-f.w.done:
		return f.w.err
	default:
		return nil
	}
}

// ProposeMembership is ChangeMembership for manual mode (the
// simulation): it steps cc into raft at once and returns; Pump, then watch
// the future. A node abandoned without Stop (a simulated crash) never
// completes it.
func (n *Node) ProposeMembership(cc *raftpb.ConfChange) (*ConfFuture, error) {
	if !n.manual {
		return nil, errors.New("raftnode: ProposeMembership is for manual mode; use ChangeMembership")
	}
	if n.dead.Load() {
		return nil, ErrStopped
	}
	cc = proto.Clone(cc).(*raftpb.ConfChange)
	cc.Id = new(n.nextID.Add(1))
	w := &confWait{cc: cc, done: make(chan struct{})}
	n.proposeConf(w)
	return &ConfFuture{w}, nil
}

// MembershipObserver is implemented by an Observer that also wants every
// applied membership change, in log order among the commands (the
// simulation's checkers replay the log with them; see ApplyMembership).
type MembershipObserver interface {
	MembershipApplied(index uint64, cc *raftpb.ConfChange)
}

// ApplyInspector is implemented by an Observer that reads the state
// machine as each command leaves it, before the next command of the batch
// is applied (watches that report every change of a lock, not each
// batch's last state). Inspect runs on the Ready loop with the machine
// locked: it may only read m, and must return quickly.
type ApplyInspector interface {
	Inspect(index uint64, cmd *fsmpb.Command, res *fsmpb.Result, m *fsm.Machine)
}

// ApplyMembership is what applying the membership change cc at index
// does to the state machine: it records an added member's name and
// address (and a new group's cluster id) from the change's context, and
// marks a removed member.
func ApplyMembership(m *fsm.Machine, index uint64, cc *raftpb.ConfChange) {
	id := cc.GetNodeId()
	switch cc.GetType() {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
		var mb fsmpb.Member
		if len(cc.GetContext()) > 0 && proto.Unmarshal(cc.GetContext(), &mb) == nil && mb.GetName() != "" {
			m.SetMember(fsm.Member{ID: id, Name: mb.GetName(), PeerAddr: mb.GetPeerAddr()})
			if mb.GetClusterId() != 0 {
				m.SetClusterID(mb.GetClusterId())
			}
		}
	case raftpb.ConfChangeRemoveNode:
		m.RemoveMember(id)
	}
	m.SetApplied(index)
}

// proposeConf steps w's change into raft (on the loop).
func (n *Node) proposeConf(w *confWait) {
	if !n.wasLeader {
		w.finish(&NotLeaderError{Leader: n.leader.Load()})
		return
	}
	if err := n.rn.ProposeConfChange(w.cc); err != nil {
		w.finish(fmt.Errorf("raftnode: propose membership change: %w", err))
		return
	}
	w.proposed = true
	n.confWaits[w.cc.GetId()] = w
}

// noteConfProposals looks for the changes proposed since the last Ready
// among the entries of a Ready's messages to the log (msgs): raft replaces a change it refuses
// (one is pending) with an empty entry, and says nothing else.
func (n *Node) noteConfProposals(msgs []*raftpb.Message) {
	if len(n.confWaits) == 0 {
		return
	}
	for _, m := range msgs {
		if m.GetTo() != raft.LocalAppendThread {
			continue
		}
		for _, e := range m.GetEntries() {
			if e.GetType() != raftpb.EntryConfChange {
				continue
			}
			var cc raftpb.ConfChange
			if proto.Unmarshal(e.GetData(), &cc) == nil {
				if w := n.confWaits[cc.GetId()]; w != nil {
					w.accepted = true
				}
			}
		}
	}
	for id, w := range n.confWaits {
		if w.proposed && !w.accepted {
			delete(n.confWaits, id)
			w.finish(ErrConfChangePending)
		}
		w.proposed = false
	}
}

// applyConfChange applies a committed membership change: to raft, to the
// state machine's member records, then tells the waiter and the
// MembershipChanged hook. A node that applied its own removal stops.
func (n *Node) applyConfChange(idx uint64, cc *raftpb.ConfChange) {
	n.confState = n.rn.ApplyConfChange(cc)
	id := cc.GetNodeId()
	ApplyMembership(n.m, idx, cc)
	n.membership = n.membershipLocked()
	if w := n.confWaits[cc.GetId()]; w != nil {
		// Answered once the MembershipChanged hook has seen the change
		// (publishMembership): the caller reads the new membership there.
		delete(n.confWaits, cc.GetId())
		n.confApplied = append(n.confApplied, w)
	}
	if cc.GetType() == raftpb.ConfChangeRemoveNode && id == n.cfg.ID {
		n.loopErr = ErrRemoved
	}
	n.membershipChanged = true
	// A member added later catches up from a snapshot only if its
	// configuration names it (raft ignores one that does not), so the
	// snapshot this node sends must be taken after the change. Without a
	// snapshot yet (a new group's first entries), raft sends the log.
	if n.snapIndex > 0 {
		n.confSnapshotDue = true
	}
}

// membershipLocked builds Membership from the conf state and the state
// machine (n.mu held, or the loop before it starts).
func (n *Node) membershipLocked() Membership {
	return Membership{
		Voters:    slices.Clone(n.confState.GetVoters()),
		Learners:  slices.Clone(n.confState.GetLearners()),
		Members:   n.m.Members(),
		ClusterID: n.m.ClusterID(),
	}
}

// publishMembership calls the MembershipChanged hook if the membership
// changed since the last call (on the loop, outside n.mu).
func (n *Node) publishMembership() {
	if n.membershipChanged {
		n.membershipChanged = false
		if n.cfg.MembershipChanged != nil {
			n.cfg.MembershipChanged(n.Membership())
		}
	}
	for _, w := range n.confApplied {
		w.finish(nil)
	}
	n.confApplied = n.confApplied[:0]
}

// failConfWaits fails every waiting membership change with err (those
// that applied succeed).
func (n *Node) failConfWaits(err error) {
	n.publishMembership()
	for id, w := range n.confWaits {
		delete(n.confWaits, id)
		w.finish(err)
	}
}

type progressQuery struct {
	id            uint64
	match, commit uint64
	ok            bool
	done          chan struct{}
}

// Progress reports, on the leader, how far the log of member id matches
// the leader's (match) and the leader's commit index: a learner has caught
// up when match is close to commit. ok is false on a follower, or if id is
// not a member.
func (n *Node) Progress(ctx context.Context, id uint64) (match, commit uint64, ok bool, err error) {
	if n.manual {
		return 0, 0, false, errors.New("raftnode: Progress needs the Ready loop")
	}
	q := &progressQuery{id: id, done: make(chan struct{})}
	select {
	case n.progressC <- q:
	case <-n.doneC:
		return 0, 0, false, ErrStopped
	case <-ctx.Done():
		return 0, 0, false, ctx.Err()
	}
	select {
	case <-q.done:
		return q.match, q.commit, q.ok, nil
	case <-ctx.Done():
		return 0, 0, false, ctx.Err()
	}
}

func (n *Node) answerProgress(q *progressQuery) {
	defer close(q.done)
	if !n.wasLeader {
		return
	}
	st := n.rn.Status()
	if pr, ok := st.Progress[q.id]; ok {
		q.match, q.commit, q.ok = pr.Match, st.GetCommit(), true
	}
}

// StopRemoved stops the node with ErrRemoved: another member, which
// applied this one's removal, said so (the removal's own entry may never
// reach a removed member: the leader stops sending to it once applied).
func (n *Node) StopRemoved() {
	select {
	case n.removedC <- struct{}{}:
	default:
	}
}

// maybeRaiseLogVersion (on the loop) proposes SetLogVersion when this node
// leads, has applied an entry of its term, reads a newer log version than
// the cluster's, and every member has said it reads one too
// (Config.LogVersionDue). One at a time; a failed one is tried again at
// the next turn.
func (n *Node) maybeRaiseLogVersion() {
	cur := n.logVersion.Load()
	if cur >= n.cfg.LogVersion || n.cfg.LogVersionDue == nil || !n.caughtUp.Load() || n.raising.Load() {
		return
	}
	v, ok := n.cfg.LogVersionDue(n.membership)
	v = min(v, n.cfg.LogVersion)
	if !ok || v <= cur {
		return
	}
	n.raising.Store(true)
	cmd := &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: v}}}
	_, err := n.submit(cmd, &proposal{cb: completeFunc(func(_ *fsmpb.Result, _ uint64, err error) {
		n.raising.Store(false)
		if err != nil {
			n.log.Warn("raising the cluster's log version", "to", v, "err", err)
			return
		}
		n.log.Info("raised the cluster's log version: every member reads it", "log_version", v)
	})})
	if err != nil {
		n.raising.Store(false)
	}
}

// versionGraceElections is how many election timeouts a new leader waits
// for every member to say which log version it reads before it writes
// commands stripped for a member it has not heard from (submit).
const versionGraceElections = 2

// tick advances raft's clock and counts the ticks of this node's lead.
func (n *Node) tick() {
	if n.manual {
		n.stepHeld()
	}
	n.rn.Tick()
	if n.wasLeader {
		n.ledTicks.Add(1)
	}
	n.retryBackups()
}
