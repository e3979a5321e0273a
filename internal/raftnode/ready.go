package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// handleReady processes one Ready in the order the package doc numbers.
func (n *Node) handleReady(rd raft.Ready) error {
	start := time.Now()
	defer func() { n.metrics.ReadyNanos += uint64(time.Since(start)) }()
	n.metrics.Readies++
	// A leader sends first and writes its own log meanwhile (Raft thesis
	// 10.2.1): its MsgApps carry entries it is about to persist, and since
	// this loop finishes the write before the next Ready, no entry is
	// applied (or acknowledged) before the leader's copy is durable.
	// Everyone else sends only after persisting (votes and append
	// responses must describe durable state).
	leading := n.rn.BasicStatus().RaftState == raft.StateLeader
	if leading {
		n.send(rd.Messages)
	}
	// Committed entries that are already durable here are applied before
	// this Ready's write (as etcd applies concurrently with persisting):
	// their answers need not wait for an fsync of newer entries. Entries
	// raft hands over as committed but not yet durable here (in sync mode
	// it may, from this very Ready) wait for the write below.
	apply := rd.CommittedEntries
	if raft.IsEmptySnap(rd.Snapshot) {
		// Durable here means at or below the end of the durable log and
		// below whatever this Ready rewrites.
		durable := n.persisted
		if len(rd.Entries) > 0 {
			durable = min(durable, rd.Entries[0].GetIndex()-1)
		}
		i := 0
		for i < len(apply) && apply[i].GetIndex() <= durable {
			i++
		}
		t := time.Now()
		n.applyEntries(apply[:i])
		n.metrics.ApplyNanos += uint64(time.Since(t))
		apply = apply[i:]
	}
	// 1. Persist.
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.cfg.Store.SaveSnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("save snapshot: %w", err)
		}
	}
	// A snapshot's hard state must be durable before anything is sent:
	// raft's MustSync is false when only the commit index moved, but the
	// store recovers only snapshots at or below the durable commit
	// (wal.ValidSnapshotEntries), so a crash that lost this commit would
	// drop the snapshot this node is about to acknowledge, and the leader
	// would later panic with "tocommit(N) is out of range [lastIndex(M)]"
	// (etcd issue 10219; found by internal/sim).
	mustSync := rd.MustSync || (rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot))
	if len(rd.Entries) > 0 || (rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState)) {
		t0 := time.Now()
		if err := n.cfg.Store.Save(rd.HardState, rd.Entries, mustSync); err != nil {
			return fmt.Errorf("save entries: %w", err)
		}
		n.metrics.SaveNanos += uint64(time.Since(t0))
		if mustSync {
			n.metrics.Fsyncs++
		}
		n.metrics.EntriesSaved += uint64(len(rd.Entries))
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		n.persisted = rd.Snapshot.GetMetadata().GetIndex()
	}
	if len(rd.Entries) > 0 {
		// Writing entry i discards what was at i and after: the durable
		// log now ends here, even if it ended further before.
		n.persisted = rd.Entries[len(rd.Entries)-1].GetIndex()
	}
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.ms.ApplySnapshot(rd.Snapshot); err != nil {
			return fmt.Errorf("apply snapshot to raft storage: %w", err)
		}
	}
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		if err := n.ms.SetHardState(rd.HardState); err != nil {
			return err
		}
	}
	if len(rd.Entries) > 0 {
		if err := n.ms.Append(rd.Entries); err != nil {
			return err
		}
	}
	// 2. Send, now that everything above is durable.
	if !leading {
		n.send(rd.Messages)
	}
	// 3. Apply.
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.restore(rd.Snapshot); err != nil {
			return err
		}
	}
	t1 := time.Now()
	n.applyEntries(apply)
	n.metrics.ApplyNanos += uint64(time.Since(t1))
	n.noteLeadership(rd.SoftState)
	// 4. Reads whose index is applied, then Advance.
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		if reads, ok := n.readsByCtx[id]; ok {
			delete(n.readsByCtx, id)
			n.readyReads = append(n.readyReads, readBatch{index: rs.Index, reads: reads})
		}
	}
	n.releaseReads()
	n.rn.Advance(rd)
	// After Advance: raft refuses to campaign while committed conf
	// changes are unapplied.
	n.maybeCampaign()
	n.maybeSnapshot()
	n.refreshStatus()
	return nil
}

func (n *Node) restore(snap *raftpb.Snapshot) error {
	n.mu.Lock()
	err := n.m.Restore(snap.GetData())
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restore state machine from snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	n.snapIndex = snap.GetMetadata().GetIndex()
	n.applied = n.snapIndex
	n.confState = proto.Clone(snap.GetMetadata().GetConfState()).(*raftpb.ConfState)
	n.log.Info("restored snapshot", "index", n.snapIndex)
	return nil
}

type applied struct {
	index uint64
	cmd   *fsmpb.Command
	res   *fsmpb.Result
}

func (n *Node) applyEntries(ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	out := make([]applied, 0, len(ents))
	n.mu.Lock()
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= n.applied {
			continue
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				n.m.SetApplied(idx)
				break
			}
			cmd := &fsmpb.Command{}
			if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
				// Only this node's own proposals enter the log, so this is
				// a corrupt log: a broken invariant.
				panic(fmt.Sprintf("raftnode: entry %d does not decode: %v", idx, err))
			}
			out = append(out, applied{index: idx, cmd: cmd, res: n.m.Apply(idx, cmd)})
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				panic(fmt.Sprintf("raftnode: conf change %d does not decode: %v", idx, err))
			}
			n.confState = n.rn.ApplyConfChange(cc)
			n.m.SetApplied(idx)
		case raftpb.EntryConfChangeV2:
			cc := &raftpb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				panic(fmt.Sprintf("raftnode: conf change %d does not decode: %v", idx, err))
			}
			n.confState = n.rn.ApplyConfChange(cc)
			n.m.SetApplied(idx)
		}
		n.applied = idx
	}
	n.mu.Unlock()
	n.metrics.Applied += uint64(len(out))
	for _, a := range out {
		if a.cmd.GetProposer() == n.cfg.ID {
			n.finish(a.cmd.GetProposalId(), a.res, a.index, nil)
		}
		if n.cfg.Observer != nil {
			n.cfg.Observer.Applied(a.index, a.cmd, a.res)
		}
	}
}

func (n *Node) finish(id uint64, res *fsmpb.Result, index uint64, err error) {
	n.wmu.Lock()
	p := n.waiting[id]
	delete(n.waiting, id)
	n.wmu.Unlock()
	if p == nil {
		return
	}
	p.res, p.index, p.err = res, index, err
	close(p.done)
}

// noteLeadership publishes leadership changes. Losing leadership makes the
// outcome of every waiting proposal unknown and fails waiting reads.
func (n *Node) noteLeadership(ss *raft.SoftState) {
	st := n.rn.BasicStatus()
	isLeader := st.RaftState == raft.StateLeader
	n.leader.Store(st.Lead)
	if isLeader == n.wasLeader && st.GetTerm() == n.term {
		return
	}
	wasLeader := n.wasLeader
	n.wasLeader = isLeader
	n.term = st.GetTerm()
	n.isLeader.Store(isLeader)
	if wasLeader && !isLeader {
		n.failAll(ErrOutcomeUnknown)
	}
	if wasLeader != isLeader {
		n.log.Info("leadership changed", "leader", isLeader, "term", st.GetTerm(), "lead", fmt.Sprintf("%x", st.Lead))
		if n.cfg.Observer != nil {
			n.cfg.Observer.LeaderChanged(isLeader, st.GetTerm(), n.m)
		}
	}
}

// failAll fails every waiting proposal with err and every waiting read.
func (n *Node) failAll(err error) {
	n.wmu.Lock()
	ps := n.waiting
	n.waiting = make(map[uint64]*proposal)
	n.wmu.Unlock()
	for _, p := range ps {
		p.err = err
		close(p.done)
	}
	rerr := err
	if errors.Is(err, ErrOutcomeUnknown) {
		rerr = &NotLeaderError{Leader: n.leader.Load()}
	}
	for id, reads := range n.readsByCtx {
		for _, r := range reads {
			r.err = rerr
			close(r.done)
		}
		delete(n.readsByCtx, id)
	}
	for _, b := range n.readyReads {
		for _, r := range b.reads {
			r.err = rerr
			close(r.done)
		}
	}
	n.readyReads = nil
	for _, r := range n.readQueue {
		r.err = rerr
		close(r.done)
	}
	n.readQueue = nil
}

func (n *Node) releaseReads() {
	kept := n.readyReads[:0]
	for _, b := range n.readyReads {
		if b.index > n.applied {
			kept = append(kept, b)
			continue
		}
		for _, r := range b.reads {
			close(r.done)
		}
	}
	n.readyReads = kept
}

// maybeCampaign makes a lone voter elect itself at once, at first start
// and at every restart, instead of waiting out an election timeout.
func (n *Node) maybeCampaign() {
	if n.campaigned || n.wasLeader {
		return
	}
	v := n.confState.GetVoters()
	if len(v) == 1 && v[0] == n.cfg.ID && len(n.confState.GetLearners()) == 0 {
		n.campaigned = true
		if err := n.rn.Campaign(); err != nil {
			n.log.Warn("campaign", "err", err)
		}
	}
}

func (n *Node) maybeSnapshot() {
	if n.applied-n.snapIndex < n.cfg.SnapshotEntries {
		return
	}
	n.mu.RLock()
	data, err := n.m.Snapshot()
	n.mu.RUnlock()
	if err != nil {
		n.log.Error("snapshot state machine", "err", err)
		return
	}
	snap, err := n.ms.CreateSnapshot(n.applied, n.confState, data)
	if err != nil {
		n.log.Warn("create snapshot", "index", n.applied, "err", err)
		return
	}
	if err := n.cfg.Store.SaveSnapshot(snap); err != nil {
		n.log.Error("save snapshot", "index", n.applied, "err", err)
		return
	}
	n.snapIndex = n.applied
	// Keep SnapshotEntries entries behind the snapshot so a briefly slow
	// follower catches up from the log instead of a whole snapshot.
	if n.applied > n.cfg.SnapshotEntries {
		if err := n.ms.Compact(n.applied - n.cfg.SnapshotEntries); err != nil && !errors.Is(err, raft.ErrCompacted) {
			n.log.Warn("compact", "err", err)
		}
	}
	n.metrics.Snapshots++
	n.log.Info("snapshot saved", "index", n.applied, "bytes", len(data))
}

func (n *Node) refreshStatus() {
	st := n.rn.BasicStatus()
	n.statusMu.Lock()
	n.status = Status{
		ID:      n.cfg.ID,
		Leader:  st.Lead,
		Term:    st.GetTerm(),
		Commit:  st.GetCommit(),
		Applied: n.applied,
		Role:    roleName(st.RaftState),
	}
	n.pubMetrics = n.metrics
	n.statusMu.Unlock()
}

func (n *Node) send(msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	n.cfg.Transport.Send(n.cfg.GroupID, msgs)
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			n.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// roleName is the role as operators read it.
func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateFollower:
		return "follower"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return s.String()
}
