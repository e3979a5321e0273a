package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Status is a point-in-time view of the node.
type Status struct {
	ID, Leader, Term, Commit, Applied uint64
	Role                              string
}

// Node is one member of one Raft group.
type Node struct {
	cfg Config
	log *slog.Logger
	rn  *raft.RawNode
	ms  *raft.MemoryStorage

	mu sync.RWMutex // guards m against the loop's writes
	m  *fsm.Machine

	propC    chan *proposal
	deferral deferral
	readC    chan *readWait
	recvC    chan *raftpb.Message
	tickC    <-chan time.Time // the loop's ticker; nil in manual mode
	unreachC chan uint64
	stopC    chan struct{}
	doneC    chan struct{}
	stopOnce sync.Once
	manual   bool // no loop goroutine: the caller drives Tick and Pump

	nextID   atomic.Uint64
	dead     atomic.Bool           // the loop has ended: nothing more is proposed
	stopErr  atomic.Pointer[error] // why the loop ended, if by an error
	isLeader atomic.Bool
	// logVersion is the cluster's log version as of the last applied
	// entry (LogVersion); submit reads it.
	logVersion atomic.Uint32
	// caughtUp: this node leads and has applied an entry of its own term,
	// so everything committed before its term is applied, logVersion
	// included.
	caughtUp atomic.Bool
	// raising: a SetLogVersion this node proposed has not completed.
	raising atomic.Bool
	// ledTicks counts the ticks since this node took the lead (tick).
	ledTicks atomic.Int64
	leader   atomic.Uint64

	wmu     sync.Mutex
	waiting map[uint64]*proposal

	confC             chan *confWait
	progressC         chan *progressQuery
	transferC         chan *transferQuery
	backupC           chan *backupQuery
	removedC          chan struct{}
	confWaits         map[uint64]*confWait // loop-owned, by ConfChange id
	confApplied       []*confWait          // loop-owned: applied, answered by publishMembership
	membership        Membership           // guarded by mu
	membershipChanged bool                 // loop-owned: publish at the end of the turn
	confSnapshotDue   bool                 // loop-owned: snapshot the new configuration

	statusMu   sync.Mutex
	status     Status
	pubMetrics Metrics

	// Loop-owned state.
	confState *raftpb.ConfState
	snapIndex uint64
	// snapOffset is snapshotOffset for offsetVoters, the voters it was
	// worked out for.
	snapOffset   uint64
	offsetVoters []uint64
	applied      uint64
	// A snapshot is taken off the loop in two steps (see maybeSnapshot):
	// encC delivers the encoding of the state machine frozen at its index,
	// snapC the outcome of saving it. At most one snapshot is under way;
	// both are nil when none is. In manual mode FinishSnapshot runs the
	// encoding, manualEncode, then the save, manualSave.
	encC         chan encResult
	encStart     time.Time
	snapC        chan snapResult
	manualEncode func() encResult
	manualSave   func() snapResult
	loopErr      error // set when the loop must stop serving
	readQueue    []*readWait
	readsByCtx   map[uint64][]*readWait
	readyReads   []readBatch
	nextReadCtx  uint64
	wasLeader    bool
	// What dropCommitOnly must not leave out (ready.go): commit indexes
	// followers must hear of at once, and the highest commit sent to each.
	mustTell     []uint64
	toldCommit   map[uint64]uint64
	appendedTerm uint64   // the term of the last entry appended
	beatAnswered []uint64 // followers whose heartbeat response was stepped since the last Ready
	replicating  []uint64 // scratch
	campaigned   bool
	term         uint64
	metrics      Metrics
	// applyLatency times each batch of committed entries applied;
	// commits, the leader's entries from the log writer to their commit.
	applyLatency latencyRecorder
	commits      commitClock

	// The append worker's: what it handed to storage, and its queues.
	appends    *mailbox // MsgStorageAppend, loop to worker
	locals     *mailbox // responses to this node, worker to loop
	appendErr  chan error
	appendDone chan struct{}
	astats     appendStats
	// fsyncLatency times the worker's synced log writes.
	fsyncLatency latencyRecorder
	savedTerm    uint64 // worker-owned: the hard state last written
	savedVote    uint64
	// collect runs a garbage collection without blocking the caller
	// (collectAfterSnapshot); collecting is set while one runs.
	collect    func(done func())
	collecting atomic.Bool
	// writtenCommit is the commit index of the last hard state the worker
	// wrote to the log (maybe not yet synced: a snapshot record's own sync
	// makes it durable, since the log is written in order).
	writtenCommit atomic.Uint64

	// Backups (backup.go), loop-owned: those waiting for the next
	// snapshot, and those the snapshot being encoded answers, with what
	// was frozen for them.
	backupsDue []*backupQuery
	encBackups []*backupQuery
	encBackup  Backup
}

// Metrics counts the node's batching, for operators and benchmarks.
type Metrics struct {
	Readies, Proposals, ProposeBatches, Fsyncs, EntriesSaved, Applied, Snapshots uint64
	// Deferred counts the proposals held back to share a later write.
	Deferred uint64
	// SaveNanos is the append worker's time writing the log (fsyncs
	// included); ApplyNanos the Ready loop's time applying entries, and
	// ReadyNanos its time handling Readies in all. SnapshotPauseNanos is
	// the time applying waited for snapshots to freeze the state machine.
	SaveNanos, ApplyNanos, ReadyNanos, SnapshotPauseNanos uint64
	// LeaderChanges counts the times this node learnt of a new leader
	// (the first one it knew included).
	LeaderChanges uint64
	// FsyncLatency times the synced log writes (the write and its
	// fdatasync); ApplyLatency the batches of committed entries applied
	// (the observer's work on them included); CommitLatency, while this
	// node leads, each batch of its new entries from when it handed them
	// to the log writer to when they came back committed (a quorum had
	// them on disk).
	FsyncLatency, ApplyLatency, CommitLatency Latency
}

type proposal struct {
	id    uint64
	data  []byte
	done  chan struct{} // closed on completion, unless cb is set
	cb    Completer
	res   *fsmpb.Result
	index uint64
	err   error
	// fence: the proposal is a request's seq fence (fsm.SeqFence), and
	// refusal what its caller is told once the fence settles the seq.
	fence *fenced
	// waitLock and waitSession: a waiting acquire's (defer.go).
	waitLock    string
	waitSession uint64
}

type fenced struct {
	refusal error
	leader  uint64 // where a retry goes when an earlier attempt applied
}

// complete records the proposal's outcome and tells whoever waits. Only
// the one who removed p from Node.waiting calls it, so it runs once.
func (p *proposal) complete(res *fsmpb.Result, index uint64, err error) {
	if f := p.fence; f != nil && err == nil {
		switch fsm.FenceOutcome(res) {
		case fsm.FenceSettled:
			res, index, err = nil, 0, f.refusal
		case fsm.FenceFoundAnswer:
			res, index, err = nil, 0, &NotLeaderError{Leader: f.leader}
		default: // the log's own refusal of the seq
			res, index, err = nil, 0, fsm.ErrorOf(res)
		}
	}
	if p.cb != nil {
		p.cb.Complete(res, index, err)
		return
	}
	p.res, p.index, p.err = res, index, err
	close(p.done)
}

type readWait struct {
	done chan struct{}
	err  error
}

type readBatch struct {
	index uint64
	reads []*readWait
}

// Start restores the state machine from cfg.Recovered, joins or
// bootstraps the group, and starts the Ready loop. Stop ends it.
func Start(cfg Config) (*Node, error) {
	n, err := newNode(cfg)
	if err != nil {
		return nil, err
	}
	go n.runAppender()
	go n.run()
	return n, nil
}

// StartManual builds a Node exactly as Start does but starts no goroutine
// and no ticker: the caller drives the Ready loop with Tick and Pump, one
// loop turn at a time, from one goroutine. It exists for the deterministic
// simulation (internal/sim), which runs many nodes on a virtual clock. The
// blocking methods (Propose, ReadBarrier, Future.Wait) must not be used
// from the driving goroutine; use Submit, StartRead and the futures' Done
// channels instead. A crash is simulated by abandoning the Node.
func StartManual(cfg Config) (*Node, error) {
	n, err := newNode(cfg)
	if err != nil {
		return nil, err
	}
	n.manual = true
	n.refreshStatus()
	return n, nil
}

func newNode(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if cfg.LogVersion == 0 {
		cfg.LogVersion = fsm.LogVersion
	}
	base := lg.With("node_id", fmt.Sprintf("%x", cfg.ID))
	lg = base.With("component", "raftnode")
	n := &Node{
		cfg:        cfg,
		log:        lg,
		ms:         raft.NewMemoryStorage(),
		m:          fsm.New(),
		propC:      make(chan *proposal, cfg.MaxInFlight),
		readC:      make(chan *readWait, cfg.MaxInFlight),
		recvC:      make(chan *raftpb.Message, cfg.MaxInbound),
		unreachC:   make(chan uint64, 64),
		stopC:      make(chan struct{}),
		doneC:      make(chan struct{}),
		waiting:    make(map[uint64]*proposal),
		readsByCtx: make(map[uint64][]*readWait),
		confState:  &raftpb.ConfState{},
		confC:      make(chan *confWait),
		progressC:  make(chan *progressQuery),
		transferC:  make(chan *transferQuery),
		backupC:    make(chan *backupQuery),
		removedC:   make(chan struct{}, 1),
		confWaits:  make(map[uint64]*confWait),
		appends:    newMailbox(),
		locals:     newMailbox(),
		appendErr:  make(chan error, 1),
		appendDone: make(chan struct{}),
		collect:    collectInBackground,
	}
	if cfg.ProposalIDBase != 0 {
		n.nextID.Store(cfg.ProposalIDBase)
	} else {
		n.nextID.Store(uint64(time.Now().UnixNano()))
	}
	rec := cfg.Recovered
	restart := false
	if rec.Snapshot != nil && !raft.IsEmptySnap(rec.Snapshot) {
		if err := n.ms.ApplySnapshot(metadataOnly(rec.Snapshot)); err != nil {
			return nil, fmt.Errorf("raftnode: load snapshot: %w", err)
		}
		if err := n.m.Restore(rec.Snapshot.GetData()); err != nil {
			return nil, fmt.Errorf("raftnode: restore state machine from snapshot %d: %w", rec.Snapshot.GetMetadata().GetIndex(), err)
		}
		n.snapIndex = rec.Snapshot.GetMetadata().GetIndex()
		n.applied = n.snapIndex
		n.confState = proto.Clone(rec.Snapshot.GetMetadata().GetConfState()).(*raftpb.ConfState)
		restart = true
	}
	n.logVersion.Store(n.m.LogVersion())
	if rec.HardState != nil && !raft.IsEmptyHardState(rec.HardState) {
		if err := n.ms.SetHardState(rec.HardState); err != nil {
			return nil, fmt.Errorf("raftnode: load hard state: %w", err)
		}
		n.savedTerm, n.savedVote = rec.HardState.GetTerm(), rec.HardState.GetVote()
		n.writtenCommit.Store(rec.HardState.GetCommit())
		restart = true
	}
	if len(rec.Entries) > 0 {
		if err := n.ms.Append(rec.Entries); err != nil {
			return nil, fmt.Errorf("raftnode: load entries: %w", err)
		}
		restart = true
	}
	rc := &raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   diskSnapshots{n.ms, cfg.Store, lg, n},
		Applied:                   n.applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		AsyncStorageWrites:        true,
		StepDownOnRemoval:         true,
		Logger:                    newRaftLogger(base),
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	n.rn = rn
	// What was recovered now lives in the state machine and n.ms: do not
	// keep the recovered snapshot and log alive in the config as well.
	n.cfg.Recovered = Recovered{}
	n.membership = n.membershipLocked()
	n.membershipChanged = true
	if !restart && !cfg.Join {
		peers := make([]raft.Peer, len(cfg.Peers))
		for i, id := range cfg.Peers {
			peers[i] = raft.Peer{ID: id, Context: cfg.PeerContexts[id]}
		}
		if len(peers) == 0 {
			peers = []raft.Peer{{ID: cfg.ID}}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("raftnode: bootstrap: %w", err)
		}
	}
	return n, nil
}

// Stop ends the Ready loop and fails every waiting request with
// ErrStopped. It does not close the store or the transport.
func (n *Node) Stop() {
	if n.manual {
		n.stopOnce.Do(func() {
			close(n.stopC)
			n.fail(nil)
			close(n.doneC)
		})
		return
	}
	n.stopOnce.Do(func() { close(n.stopC) })
	<-n.doneC
	<-n.appendDone
}

// Done is closed when the Ready loop has ended.
func (n *Node) Done() <-chan struct{} { return n.doneC }

// Err is why the Ready loop ended, once Done is closed: nil after Stop,
// else the error that made the node stop serving (its log could not be
// written, an entry it cannot apply, ErrLogLost, raft's own invariant
// checks).
func (n *Node) Err() error {
	if p := n.stopErr.Load(); p != nil {
		return *p
	}
	return nil
}

// ID is this node's Raft id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// IsLeader reports whether this node currently believes it leads.
func (n *Node) IsLeader() bool { return n.isLeader.Load() }

// LogVersion is the cluster's log version as of the last applied entry
// (fsm.Machine.LogVersion): what this node writes if it leads.
func (n *Node) LogVersion() uint32 { return n.logVersion.Load() }

// Leader is the current leader's id, 0 if unknown.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// Status returns the node's view of the group.
func (n *Node) Status() Status {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	return n.status
}

// Metrics returns the batching counters: the loop's as of its last
// Ready, the append worker's and the latencies as of now.
func (n *Node) Metrics() Metrics {
	n.statusMu.Lock()
	m := n.pubMetrics
	n.statusMu.Unlock()
	m.Fsyncs = n.astats.fsyncs.Load()
	m.EntriesSaved = n.astats.entries.Load()
	m.SaveNanos = n.astats.saveNanos.Load()
	m.FsyncLatency = n.fsyncLatency.load()
	m.ApplyLatency = n.applyLatency.load()
	m.CommitLatency = n.commits.latency.load()
	return m
}

// View runs f with read access to the state machine. f must not keep m.
func (n *Node) View(f func(m *fsm.Machine)) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	f(n.m)
}

// Step hands a message from a peer to raft. It never blocks: when the
// inbound queue is full the message is dropped and raft retransmits.
func (n *Node) Step(m *raftpb.Message) {
	select {
	case n.recvC <- m:
	default:
	}
}

// ReportUnreachable tells raft that sending to id failed.
func (n *Node) ReportUnreachable(id uint64) {
	select {
	case n.unreachC <- id:
	default:
	}
}

func (n *Node) run() {
	defer close(n.doneC)
	// raft panics when an invariant breaks (a message that says this
	// member lost its log, above all). The member stops serving with that
	// as its error instead of taking down the process that embeds it.
	defer func() {
		if r := recover(); r != nil {
			n.fail(raftPanicError(r))
		}
	}()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	n.tickC = ticker.C
	n.refreshStatus()
	for {
		select {
		case <-ticker.C:
			n.tick()
		case p := <-n.propC:
			// One proposal woke the loop; others are usually a moment
			// behind it (the session streams answered by the last batch
			// send their next requests together). Yield once so they are
			// submitted first and go into the same MsgProp, Ready and
			// MsgApp: on a busy machine this cuts the loop's work per
			// command; on an idle one nothing else is runnable and
			// Gosched returns at once.
			runtime.Gosched()
			n.stepProposals(p)
		case <-n.deferral.c:
			n.stepHeld()
		case r := <-n.readC:
			n.readQueue = append(n.readQueue, r)
		case m := <-n.recvC:
			n.stepMessage(m)
		case id := <-n.unreachC:
			n.rn.ReportUnreachable(id)
		case <-n.locals.signal:
			// drain, in turn, steps them.
		case r := <-n.encC:
			n.encoded(r)
		case r := <-n.snapC:
			n.finishSnapshot(r)
		case w := <-n.confC:
			n.proposeConf(w)
		case q := <-n.progressC:
			n.answerProgress(q)
		case q := <-n.transferC:
			n.startTransfer(q)
		case q := <-n.backupC:
			n.queueBackup(q)
		case <-n.removedC:
			n.loopErr = ErrRemoved
		case err := <-n.appendErr:
			n.fail(err)
			return
		case <-n.stopC:
			n.fail(nil)
			return
		}
		if err := n.turn(); err != nil {
			return
		}
	}
}

// turn ends one loop turn after its first event: it gathers whatever else
// queued meanwhile into the same Ready and handles that Ready, if any. An
// error means the node stopped serving (its log cannot be written).
func (n *Node) turn() error {
	n.drain()
	if n.loopErr != nil {
		return n.fail(n.loopErr)
	}
	n.issueReads()
	// Handling a Ready often makes the next one (stepping the append
	// worker's responses commits entries): keep going until raft has
	// nothing more, taking in what queued meanwhile, instead of waiting
	// for the next event or tick.
	for n.rn.HasReady() {
		// A long run of Readies (a restart replaying the log after its
		// snapshot, 10 MB of entries at a time) must not stop the clock:
		// the ticker drops what is not taken, and a member that replayed
		// for seconds would then wait a whole election timeout more
		// before campaigning.
		select {
		case <-n.tickC:
			n.tick()
		default:
		}
		if err := n.handleReady(n.rn.Ready()); err != nil {
			return n.fail(err)
		}
		n.drain()
		if n.loopErr != nil {
			return n.fail(n.loopErr)
		}
		n.issueReads()
	}
	return nil
}

// fail stops serving after an error: a log that cannot be written (or a
// snapshot that cannot be restored) cannot be trusted, so refuse rather
// than acknowledge unsafely.
func (n *Node) fail(err error) error {
	if err != nil {
		n.log.Error("stopping node", "err", err)
		n.stopErr.CompareAndSwap(nil, &err)
	}
	n.dead.Store(true)
	n.isLeader.Store(false)
	n.failAll(ErrStopped)
	n.failConfWaits(ErrStopped)
	return err
}

// raftPanicError turns what raft panicked with into the node's error.
func raftPanicError(r any) error {
	msg := fmt.Sprint(r)
	// raft's commitTo: a heartbeat or append commits past this log's end.
	if strings.Contains(msg, "is out of range [lastIndex") {
		return fmt.Errorf("%w: %s", ErrLogLost, msg)
	}
	return fmt.Errorf("raftnode: raft stopped the member: %s", msg)
}

// Tick advances raft's logical clock by one tick and runs the loop turn
// that follows, as the loop does when its ticker fires. Manual mode only.
func (n *Node) Tick() error {
	n.tick()
	return n.turn()
}

// Pump runs one loop turn if anything is pending: queued messages,
// proposals, reads or unreachable reports, or a Ready. It reports whether
// it did anything; the caller pumps until it reports false. Manual mode
// only.
func (n *Node) Pump() (bool, error) {
	busy := len(n.recvC) > 0 || len(n.propC) > 0 || len(n.readC) > 0 || len(n.unreachC) > 0 ||
		len(n.readQueue) > 0 || n.locals.len() > 0 || n.rn.HasReady() || len(n.removedC) > 0
	if !busy {
		return false, nil
	}
	select {
	case <-n.removedC:
		n.loopErr = ErrRemoved
	default:
	}
	for {
		select {
		case id := <-n.unreachC:
			n.rn.ReportUnreachable(id)
			continue
		default:
		}
		break
	}
	return true, n.turn()
}

// SnapshotPending reports whether, in manual mode, a snapshot was taken
// and waits for FinishSnapshot: first to be encoded, then to be saved.
// The state machine was frozen when the snapshot was taken and goes on
// applying meanwhile, as it does while a goroutine encodes, so the
// simulation puts applies, time and crashes between freezing and
// encoding, and between encoding and saving.
func (n *Node) SnapshotPending() bool { return n.encC != nil || n.snapC != nil }

// FinishSnapshot completes the next step of the pending snapshot, in
// manual mode: its encoding, or its save (the snapshot is written to the
// store, then raft's storage learns of it). Pump after it.
func (n *Node) FinishSnapshot() {
	switch {
	case n.encC != nil:
		n.awaitEncoding()
	case n.snapC != nil:
		save := n.manualSave
		n.manualSave = nil
		n.finishSnapshot(save())
	}
}

// drain takes everything already queued without blocking: first the
// responses of finished storage work, then messages, proposals and reads.
func (n *Node) drain() {
	for _, m := range n.locals.take() {
		n.stepLocal(m)
		if n.loopErr != nil {
			return
		}
	}
	for range n.cfg.MaxBatch {
		select {
		case m := <-n.recvC:
			n.stepMessage(m)
			continue
		default:
		}
		break
	}
	select {
	case p := <-n.propC:
		n.stepProposals(p)
	default:
	}
	for {
		select {
		case r := <-n.readC:
			n.readQueue = append(n.readQueue, r)
			continue
		default:
		}
		return
	}
}

func (n *Node) stepMessage(m *raftpb.Message) {
	if m.GetType() == raftpb.MsgHeartbeatResp {
		n.beatAnswered = append(n.beatAnswered, m.GetFrom())
	}
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepLocalMsg) {
		n.log.Debug("step", "err", err)
	}
}

// flushObserver tells the observer that a batch of completions and
// Applied calls ended.
func (n *Node) flushObserver() {
	if n.cfg.Observer != nil {
		n.cfg.Observer.Flush()
	}
}

func (n *Node) issueReads() {
	if len(n.readQueue) == 0 {
		return
	}
	if !n.wasLeader {
		err := &NotLeaderError{Leader: n.leader.Load()}
		for _, r := range n.readQueue {
			r.err = err
			close(r.done)
		}
		n.readQueue = nil
		return
	}
	n.nextReadCtx++
	var ctx [8]byte
	binary.BigEndian.PutUint64(ctx[:], n.nextReadCtx)
	n.readsByCtx[n.nextReadCtx] = n.readQueue
	n.readQueue = nil
	n.rn.ReadIndex(ctx[:])
}

// diskSnapshots is the raft.Storage of a node: its MemoryStorage, which
// holds the log and only the metadata of the newest snapshot, with the
// snapshot's data read from the log store when raft asks for it (to send
// to a follower that fell behind the log).
type diskSnapshots struct {
	*raft.MemoryStorage
	store LogStore
	log   *slog.Logger
	n     *Node
}

func (d diskSnapshots) Snapshot() (*raftpb.Snapshot, error) {
	meta, err := d.MemoryStorage.Snapshot()
	if err != nil || raft.IsEmptySnap(meta) {
		return meta, err
	}
	// Raft asks on the loop, which owns confState. A snapshot from before
	// the last membership change is of no use to a member it added (raft
	// ignores a snapshot whose configuration lacks it): wait for the one
	// the change made due (confSnapshotDue).
	if !proto.Equal(meta.GetMetadata().GetConfState(), d.n.confState) {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	// The store saves a snapshot before n.ms learns of it, so the newest
	// on disk is at least as new as meta; any snapshot on disk is of
	// committed state, so an older one (after a failed save) is still
	// correct, only less useful.
	snap, err := d.store.Snapshot()
	if err != nil {
		// raft panics on any other error; this one makes it retry later.
		d.log.Warn("read snapshot to send to a follower", "err", err)
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return snap, nil
}

// metadataOnly is snap without its data, for n.ms to hold.
func metadataOnly(snap *raftpb.Snapshot) *raftpb.Snapshot {
	return &raftpb.Snapshot{Metadata: snap.GetMetadata()}
}
