package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// handleReady processes one Ready. With raft's AsyncStorageWrites, the
// Ready's work arrives as messages: those to peers go out at once; the
// MsgStorageAppend (entries, hard state, snapshot to make durable) goes to
// the append worker, which delivers its responses only after the write is
// durable; the MsgStorageApply (committed entries, which raft hands over
// only once they are durable here) is applied right here, on the loop, and
// its response stepped back. So the leader sends MsgApp for new entries
// while its own earlier writes are still in flight (Raft thesis 10.2.1),
// and commits as soon as a quorum, itself or not, has them on disk.
func (n *Node) handleReady(rd raft.Ready) error {
	start := time.Now()
	defer func() { n.metrics.ReadyNanos += uint64(time.Since(start)) }()
	n.metrics.Readies++
	n.noteConfProposals(rd.Messages) // before the append worker owns them
	var peers []*raftpb.Message
	var apply *raftpb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			if ents := m.GetEntries(); n.wasLeader && len(ents) > 0 {
				n.commits.appended(ents[len(ents)-1].GetIndex(), start)
			}
			n.noteMustTell(m.GetEntries())
			n.appends.put(m)
		case raft.LocalApplyThread:
			apply = m
		default:
			peers = append(peers, m)
		}
	}
	n.send(n.dropCommitOnly(peers))
	if apply != nil {
		// The write that just ended may have logged the commit of what
		// is applied so far, and this turn applies what it committed:
		// try the snapshot before. Checked only after the apply, a
		// member whose writes each carry the previous commit (commands
		// one at a time, each write merged with the commit's) never
		// found its logged commit at the applied index, and postponed
		// snapshots for as long as that went on.
		n.maybeSnapshot()
		n.apply(apply)
	}
	n.noteLeadership(rd.SoftState)
	n.publishMembership()
	// Reads whose index is applied.
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
	// Raft refuses to campaign while committed conf changes are unapplied.
	n.maybeCampaign()
	n.maybeRaiseLogVersion()
	n.maybeSnapshot()
	n.refreshStatus()
	return nil
}

// stepLocal steps a response of the local storage work back into raft. A
// snapshot written by the append worker is restored into the state
// machine first: its response tells raft the snapshot is applied.
func (n *Node) stepLocal(m *raftpb.Message) {
	restored := 0
	if m.GetType() == raftpb.MsgStorageAppendResp {
		if snap := m.GetSnapshot(); snap != nil && !raft.IsEmptySnap(snap) && snap.GetMetadata().GetIndex() > n.applied {
			if err := n.restore(snap); err != nil {
				// Raft would take the snapshot as applied: stop serving
				// instead, as for a log that cannot be written.
				n.loopErr = err
				return
			}
			restored = len(snap.GetData())
		}
	}
	n.stepMessage(m)
	// Raft has let go of the snapshot's data now, too.
	n.collectAfterSnapshot(restored)
}

// apply applies a MsgStorageApply's entries and steps its responses.
func (n *Node) apply(m *raftpb.Message) {
	t := time.Now()
	ents := m.GetEntries()
	if len(ents) > 0 {
		n.commits.committed(ents[len(ents)-1].GetIndex(), t)
	}
	n.applyEntries(ents)
	took := time.Since(t)
	n.metrics.ApplyNanos += uint64(took)
	if len(ents) > 0 {
		n.applyLatency.observe(took)
	}
	if n.loopErr != nil {
		return // raft must not learn that entries it could not apply were
	}
	for _, r := range m.GetResponses() {
		n.stepLocal(r)
	}
}

func (n *Node) restore(snap *raftpb.Snapshot) error {
	// Our own snapshot's encoding ends first, so that the state it froze
	// is thawed before it is replaced. Its save may still run: the store
	// ignores it if it ends after this newer one is saved.
	n.awaitEncoding()
	n.mu.Lock()
	err := n.m.Restore(snap.GetData())
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restore state machine from snapshot %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	n.snapIndex = snap.GetMetadata().GetIndex()
	n.applied = n.snapIndex
	n.confState = proto.Clone(snap.GetMetadata().GetConfState()).(*raftpb.ConfState)
	n.mu.Lock()
	n.membership = n.membershipLocked()
	n.logVersion.Store(n.m.LogVersion())
	n.mu.Unlock()
	n.membershipChanged = true
	n.log.Info("restored snapshot", "index", n.snapIndex)
	if n.cfg.Observer != nil {
		n.cfg.Observer.Restored(n.snapIndex)
		n.flushObserver()
	}
	return nil
}

// unknownFields reports whether cmd, or its operation, carries fields this
// release's schema does not have. (Operations hold no messages of their
// own below that level.)
func unknownFields(cmd *fsmpb.Command) bool {
	m := cmd.ProtoReflect()
	if len(m.GetUnknown()) > 0 {
		return true
	}
	fd := m.WhichOneof(commandOp)
	return fd != nil && len(m.Get(fd).Message().GetUnknown()) > 0
}

// commandOp is the oneof of fsmpb.Command that holds its operation.
var commandOp = (&fsmpb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("op")

type applied struct {
	index uint64
	cmd   *fsmpb.Command
	res   *fsmpb.Result
	cc    *raftpb.ConfChange // instead of cmd: a membership change, for a MembershipObserver
}

func (n *Node) applyEntries(ents []*raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	out := make([]applied, 0, len(ents))
	var dec fsm.Decoder
	dec.Expect(len(ents))
	inspect, _ := n.cfg.Observer.(ApplyInspector)
	n.mu.Lock()
entries:
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
			cmd, fast := dec.Decode(e.GetData())
			if !fast {
				cmd = &fsmpb.Command{}
				if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
					// Only this node's own proposals enter the log, so
					// this is a corrupt log: a broken invariant.
					panic(fmt.Sprintf("raftnode: entry %d does not decode: %v", idx, err))
				}
			}
			if !fast && unknownFields(cmd) {
				// A leader of a newer release wrote a field this one
				// does not know; applying the entry without it would
				// part this member's state from the others'. Stop.
				n.loopErr = fmt.Errorf("raftnode: entry %d has fields this release does not know (a member of a newer release proposed it): stopping rather than applying it differently; upgrade this member", idx)
				n.log.Error("entry from a newer release", "index", idx)
				break entries
			}
			if v := fsm.VersionNeeded(cmd); v > n.cfg.LogVersion {
				// Only a member configured to read an older version
				// (tests of mixed releases) gets here with an entry it
				// decoded: it stops as that release would. A real
				// older release stops above, at the unknown fields, or
				// here at a SetLogVersion above it (an older release
				// started on a cluster that moved on).
				n.loopErr = fmt.Errorf("%w: entry %d needs log version %d, this member reads up to %d; upgrade this member", ErrAboveLogVersion, idx, v, n.cfg.LogVersion)
				n.log.Error("entry above this member's log version", "index", idx, "needs", v, "reads", n.cfg.LogVersion)
				break entries
			}
			res := n.m.Apply(idx, cmd)
			if inspect != nil {
				inspect.Inspect(idx, cmd, res, n.m)
			}
			out = append(out, applied{index: idx, cmd: cmd, res: res})
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				panic(fmt.Sprintf("raftnode: conf change %d does not decode: %v", idx, err))
			}
			n.applyConfChange(idx, cc)
			if _, ok := n.cfg.Observer.(MembershipObserver); ok {
				out = append(out, applied{index: idx, cc: cc})
			}
		case raftpb.EntryConfChangeV2:
			cc := &raftpb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), cc); err != nil {
				panic(fmt.Sprintf("raftnode: conf change %d does not decode: %v", idx, err))
			}
			n.confState = n.rn.ApplyConfChange(cc)
			n.m.SetApplied(idx)
		}
		n.applied = idx
		if n.wasLeader && e.GetTerm() == n.term && !n.caughtUp.Load() {
			n.caughtUp.Store(true)
		}
	}
	n.logVersion.Store(n.m.LogVersion())
	n.mu.Unlock()
	for _, a := range out {
		if a.cc != nil {
			n.cfg.Observer.(MembershipObserver).MembershipApplied(a.index, a.cc)
			continue
		}
		n.metrics.Applied++
		// The observer first: whoever learns of a result from its
		// proposal must find the server's view (the liveness tracker,
		// the hub) already past it. Completing first let a client that
		// opened a session and at once sent a keepalive be told that the
		// session was lost (found by TestSessionsChannelNumberReuse).
		if n.cfg.Observer != nil {
			n.cfg.Observer.Applied(a.index, a.cmd, a.res)
		}
		if a.cmd.GetProposer() == n.cfg.ID {
			n.finish(a.cmd.GetProposalId(), a.res, a.index, nil)
		}
	}
	n.flushObserver()
}

func (n *Node) finish(id uint64, res *fsmpb.Result, index uint64, err error) {
	n.wmu.Lock()
	p := n.waiting[id]
	delete(n.waiting, id)
	n.wmu.Unlock()
	if p == nil {
		return
	}
	p.complete(res, index, err)
}

// noteLeadership publishes leadership changes. Losing leadership makes the
// outcome of every waiting proposal unknown and fails waiting reads.
func (n *Node) noteLeadership(ss *raft.SoftState) {
	st := n.rn.BasicStatus()
	isLeader := st.RaftState == raft.StateLeader
	if old := n.leader.Swap(st.Lead); st.Lead != old && st.Lead != raft.None {
		n.metrics.LeaderChanges++
	}
	if isLeader == n.wasLeader && st.GetTerm() == n.term {
		return
	}
	n.commits.forget()
	wasLeader := n.wasLeader
	n.wasLeader = isLeader
	n.term = st.GetTerm()
	n.caughtUp.Store(false)
	n.ledTicks.Store(0)
	n.isLeader.Store(isLeader)
	clear(n.toldCommit) // what this term's leader sent
	if wasLeader && !isLeader {
		n.dropHeld()
		n.failAll(ErrOutcomeUnknown)
		n.failConfWaits(ErrOutcomeUnknown)
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
		p.complete(nil, 0, err)
	}
	n.flushObserver()
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
	if n.encC != nil || n.snapC != nil ||
		!n.confSnapshotDue && len(n.backupsDue) == 0 && !snapshotDue(n.applied, n.snapIndex, n.cfg.SnapshotEntries, n.snapshotOffset()) {
		return
	}
	// Not before the log holds a commit index that covers the snapshot:
	// the store trusts only snapshots at or below the logged commit, and
	// the hard state that commits what was just applied may still be on
	// its way to the append worker. A crash would then fall back to an
	// older snapshot whose log the store may already have released (found
	// by internal/sim).
	if n.writtenCommit.Load() < n.applied {
		return
	}
	index := n.applied
	n.confSnapshotDue = false
	// Whatever happens, the next try waits for another SnapshotEntries
	// entries: encoding costs up to a second at scale, too much to repeat
	// on every Ready while, say, the disk is full.
	n.snapIndex = max(n.snapIndex, index)
	term, err := n.ms.Term(index)
	if err != nil {
		n.log.Warn("create snapshot", "index", index, "err", err)
		return
	}
	md := &raftpb.SnapshotMetadata{Index: new(index), Term: new(term),
		ConfState: proto.Clone(n.confState).(*raftpb.ConfState)}
	start := time.Now()
	n.mu.Lock()
	f := n.m.Freeze()
	n.mu.Unlock()
	if len(n.backupsDue) > 0 {
		n.backupFrozen(Backup{Index: index, Term: term})
	}
	n.metrics.SnapshotPauseNanos += uint64(time.Since(start))
	ch := make(chan encResult, 1)
	n.encC, n.encStart = ch, start
	if n.manual {
		n.manualEncode = func() encResult { return n.encode(f, md) }
		return
	}
	go func() { ch <- n.encode(f, md) }()
}

// awaitEncoding, on the loop, waits for the snapshot being encoded, if
// any, and goes on to its save (in manual mode: encodes it now).
func (n *Node) awaitEncoding() {
	if n.encC == nil {
		return
	}
	if enc := n.manualEncode; enc != nil {
		n.manualEncode = nil
		n.encC <- enc()
	}
	n.encoded(<-n.encC)
}

// snapshotDue reports whether the applied index has passed a snapshot
// point since the last snapshot: the points are every entries entries,
// shifted by offset (< entries).
func snapshotDue(applied, snapIndex, entries, offset uint64) bool {
	return (applied+entries-offset)/entries > (snapIndex+entries-offset)/entries
}

// snapshotOffset spreads the voters' snapshot points evenly over each
// stretch of entries entries, by the member's place among the sorted
// voter ids, so that the members do not all encode and write a snapshot
// at the same index: had they, every member's disk would be busy with
// one at once (90 MB at a million locks), slowing every flush a commit
// needs, and members sharing a machine would encode on the same cores
// (0.8-1.7 s each at a million locks, against 0.3 s alone). A learner
// or a single member uses 0.
func snapshotOffset(id uint64, voters []uint64, entries uint64) uint64 {
	sorted := slices.Sorted(slices.Values(voters))
	i, ok := slices.BinarySearch(sorted, id)
	if !ok {
		return 0
	}
	return uint64(i) * entries / uint64(len(sorted))
}

// snapshotOffset is this member's snapshotOffset for the current voters,
// worked out again only when they change (maybeSnapshot runs every Ready).
func (n *Node) snapshotOffset() uint64 {
	if v := n.confState.GetVoters(); !slices.Equal(v, n.offsetVoters) {
		n.offsetVoters = slices.Clone(v)
		n.snapOffset = snapshotOffset(n.cfg.ID, v, n.cfg.SnapshotEntries)
	}
	return n.snapOffset
}

// encResult is a snapshot's encoding.
type encResult struct {
	md     *raftpb.SnapshotMetadata
	frozen *fsm.Frozen
	data   []byte
	free   func() // gives data's memory back (nil: it is on the Go heap)
	took   time.Duration
}

// snapResult is how saving a snapshot went.
type snapResult struct {
	md      *raftpb.SnapshotMetadata
	size    int
	offHeap bool // the encoding was not on the Go heap
	err     error
}

// encode encodes the state machine as frozen at md's index, off the loop,
// while the loop goes on applying (fsm.Frozen). Encoding a million locks
// takes most of a second: on the loop it stopped heartbeats for as long,
// and a state machine that held still for it kept clients waiting.
func (n *Node) encode(f *fsm.Frozen, md *raftpb.SnapshotMetadata) encResult {
	start := time.Now()
	data, free := f.EncodeWith(offHeap{})
	return encResult{md: md, frozen: f, data: data, free: free, took: time.Since(start)}
}

// encoded, on the loop, thaws the state machine and starts saving the
// encoded snapshot: the save (90 MB and a sync at a million locks) needs
// nothing from the state machine.
func (n *Node) encoded(r encResult) {
	n.encC = nil
	n.mu.Lock()
	n.m.Thaw(r.frozen)
	n.mu.Unlock()
	n.log.Info("snapshot encoded", "index", r.md.GetIndex(), "bytes", len(r.data),
		"encoding_took", r.took, "since_frozen", time.Since(n.encStart))
	ch := make(chan snapResult, 1)
	n.snapC = ch
	backups := n.takeBackups()
	save := func() snapResult {
		if backups != nil {
			backups(r.data)
		}
		res := n.save(r.md, r.data)
		if r.free != nil {
			res.offHeap = offHeap{}.mapped(r.data)
			r.free()
		}
		return res
	}
	if n.manual {
		n.manualSave = save
	} else {
		go func() { ch <- save() }()
	}
	n.refreshStatus()
}

// save writes an encoded snapshot to the store, off the loop.
func (n *Node) save(md *raftpb.SnapshotMetadata, data []byte) snapResult {
	// Disk first: raft reads the data of the snapshot n.ms describes from
	// the store (diskSnapshots), so the store must never be behind n.ms.
	if err := n.cfg.Store.SaveSnapshot(&raftpb.Snapshot{Data: data, Metadata: md}); err != nil {
		return snapResult{md: md, err: fmt.Errorf("save snapshot: %w", err)}
	}
	return snapResult{md: md, size: len(data)}
}

// finishSnapshot, on the loop, records a saved snapshot in raft's storage
// and compacts the log behind it.
func (n *Node) finishSnapshot(r snapResult) {
	n.snapC = nil
	index := r.md.GetIndex()
	var err error
	if r.err == nil {
		_, err = n.ms.CreateSnapshot(index, r.md.GetConfState(), nil)
	}
	switch {
	case r.err != nil:
		n.log.Error("snapshot", "index", index, "err", r.err)
	case errors.Is(err, raft.ErrSnapOutOfDate):
		// A newer snapshot from the leader was restored while this one
		// was saved.
		n.log.Debug("own snapshot superseded", "index", index)
	case err != nil:
		n.log.Warn("create snapshot", "index", index, "err", err)
	default:
		// Keep some entries behind the snapshot so a briefly slow
		// follower catches up from the log instead of a whole snapshot.
		if keep := min(n.cfg.SnapshotEntries, n.cfg.CatchUpEntries); index > keep {
			if err := n.ms.Compact(index - keep); err != nil && !errors.Is(err, raft.ErrCompacted) {
				n.log.Warn("compact", "err", err)
			}
		}
		n.metrics.Snapshots++
		n.log.Info("snapshot saved", "index", index, "bytes", r.size, "off_heap", r.offHeap)
		if !r.offHeap {
			n.collectAfterSnapshot(r.size)
		}
	}
	n.refreshStatus()
}

// collectAfterSnapshot starts a garbage collection once a snapshot of size
// bytes has been encoded and saved, or received and restored, if it is at
// least CollectAfterSnapshot bytes and no such collection runs yet. Not
// after the snapshot restored at start: a restart waits on the catch-up
// that follows, and a collection there does not lower the resident size
// after a restart.
//
// A snapshot is the largest short-lived allocation a member makes: saving
// one holds the state machine's encoding and the store's framed copy of it
// at once (about 100 bytes per lock), all garbage once written. A
// collection whose mark runs meanwhile counts them as live, and with GOGC
// the next one waits until the heap is twice that, so a member at a
// million locks would grow towards twice its real heap after each
// snapshot. Collecting once the buffers are dropped sets the next goal
// from what is really live. It costs one collection per snapshot, less
// than the snapshot's own encoding, and none for a small state. A
// member's own snapshot is encoded outside the Go heap when large
// (offHeap) and needs none; a snapshot received from the leader is read
// onto the heap and still gets one.
func (n *Node) collectAfterSnapshot(size int) {
	if n.cfg.CollectAfterSnapshot == 0 || size < n.cfg.CollectAfterSnapshot {
		return
	}
	if n.collecting.CompareAndSwap(false, true) {
		n.collect(func() { n.collecting.Store(false) })
	}
}

// collectInBackground runs a full collection on a goroutine of its own,
// returns the freed pages to the OS, and then calls done.
//
// Without the return, the pages of the two buffers stay resident as idle
// heap until the heap regrows into them: the scavenger keeps up to about
// 10% over the heap goal, which the snapshot had inflated. Followers,
// whose heaps regrow slowly, keep much less resident at a large
// state; a leader regrows its heap within seconds, so it gains
// less. The cost is faulting pages in again as the heap regrows, once
// per snapshot.
func collectInBackground(done func()) {
	go func() {
		defer done()
		debug.FreeOSMemory()
	}()
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

// dropCommitOnly leaves out the appends that carry no entries to a
// follower that has been sent every entry (raft's progress state
// "replicate"): they only tell it the new commit index, which it learns
// from the next append or heartbeat. Raft sends one to every follower
// after each commit; when one lock is taken at a time they were two of
// the leader's five socket writes per commit, and each follower read it,
// turned its loop and answered. Leaving a message out is what raft
// expects of any network; probes (a follower in state "probe") go.
//
// What followers must hear at once still goes: the commit of a
// membership change (a leader that removes itself stops right after it
// applies its removal, and the last other voter of two could not elect
// itself without learning it, found by embed's TestRemovingTheLeader),
// and of a leader's first entry, which commits every entry it inherited
// (those may hold membership changes this process never saw appended).
// So does the empty append raft sends when a follower answers a
// heartbeat while behind: it is how a follower whose appends were lost
// is found out (it rejects, and the leader goes back); without it such
// a follower stayed behind until the next command (internal/sim checks
// that followers catch up).
func (n *Node) dropCommitOnly(msgs []*raftpb.Message) []*raftpb.Message {
	answered := n.beatAnswered
	n.beatAnswered = n.beatAnswered[:0]
	if !slices.ContainsFunc(msgs, commitOnly) {
		return msgs
	}
	n.replicating = n.replicating[:0]
	told := uint64(math.MaxUint64) // the least commit sent to a follower
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == n.cfg.ID {
			return
		}
		told = min(told, n.toldCommit[id])
		if pr.State == tracker.StateReplicate {
			n.replicating = append(n.replicating, id)
		}
	})
	// Every follower has been sent these.
	n.mustTell = slices.DeleteFunc(n.mustTell, func(c uint64) bool { return c <= told })
	return slices.DeleteFunc(msgs, func(m *raftpb.Message) bool {
		if !commitOnly(m) || !slices.Contains(n.replicating, m.GetTo()) || slices.Contains(answered, m.GetTo()) {
			return false
		}
		sent := n.toldCommit[m.GetTo()]
		return !slices.ContainsFunc(n.mustTell, func(c uint64) bool { return sent < c && c <= m.GetCommit() })
	})
}

func commitOnly(m *raftpb.Message) bool {
	return m.GetType() == raftpb.MsgApp && len(m.GetEntries()) == 0
}

// noteMustTell records, of the entries this member appends, those whose
// commit dropCommitOnly must send at once: membership changes and the
// first entry of each term (a new leader's).
func (n *Node) noteMustTell(ents []*raftpb.Entry) {
	if !n.wasLeader && len(ents) > 0 {
		// Only a leader prunes by what it sent. A follower that becomes
		// leader commits nothing before its own first entry, which is
		// noted then and covers every applied one, so those can go.
		n.mustTell = slices.DeleteFunc(n.mustTell, func(c uint64) bool { return c <= n.applied })
	}
	for _, e := range ents {
		first := e.GetTerm() != n.appendedTerm
		n.appendedTerm = e.GetTerm()
		if first || e.GetType() == raftpb.EntryConfChange || e.GetType() == raftpb.EntryConfChangeV2 {
			if len(n.mustTell) >= maxMustTell {
				n.mustTell = slices.Delete(n.mustTell, 0, 1)
			}
			n.mustTell = append(n.mustTell, e.GetIndex())
		}
	}
}

// maxMustTell bounds mustTell while a follower is away (its entries go
// once it has been sent them all).
const maxMustTell = 1024

func (n *Node) send(msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	n.cfg.Transport.Send(n.cfg.GroupID, msgs)
	for _, m := range msgs {
		if t := m.GetType(); t == raftpb.MsgApp || t == raftpb.MsgHeartbeat {
			if n.toldCommit == nil {
				n.toldCommit = map[uint64]uint64{}
			}
			n.toldCommit[m.GetTo()] = max(n.toldCommit[m.GetTo()], m.GetCommit())
		}
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
