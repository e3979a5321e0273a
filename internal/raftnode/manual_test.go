package raftnode

import (
	"context"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// queueNet collects messages for the test to deliver by hand.
type queueNet struct{ msgs []*raftpb.Message }

func (q *queueNet) Send(_ uint64, msgs []*raftpb.Message) {
	for _, m := range msgs {
		q.msgs = append(q.msgs, proto.Clone(m).(*raftpb.Message))
	}
}

// runDry drives a manual node until it has nothing left to do, completing
// its storage writes and snapshots only when its loop is idle, and reports
// whether it did anything.
func runDry(t *testing.T, n *Node) (busy bool) {
	t.Helper()
	for {
		did, err := n.Pump()
		if err == nil && !did && n.PendingWrites() {
			did, err = true, n.Persist()
		}
		if err == nil && !did && n.SnapshotPending() {
			did = true
			n.FinishSnapshot()
		}
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			return busy
		}
		busy = true
	}
}

// startManualNodes starts a manual node for each of peers, on net.
func startManualNodes(t *testing.T, peers []uint64, net *queueNet) map[uint64]*Node {
	t.Helper()
	nodes := map[uint64]*Node{}
	for _, id := range peers {
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = id, peers, &memStore{}, net
		cfg.ProposalIDBase = id << 32
		n, err := StartManual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
	}
	return nodes
}

// settleManual delivers messages and drives the nodes until none of them
// has anything left to do.
func settleManual(t *testing.T, nodes map[uint64]*Node, peers []uint64, net *queueNet) {
	t.Helper()
	for busy := true; busy; {
		busy = false
		for _, id := range peers {
			if runDry(t, nodes[id]) {
				busy = true
			}
		}
		msgs := net.msgs
		net.msgs = nil
		for _, m := range msgs {
			nodes[m.GetTo()].Step(m)
			busy = true
		}
	}
}

// electManual ticks the nodes until one leads, and returns it.
func electManual(t *testing.T, nodes map[uint64]*Node, peers []uint64, net *queueNet) *Node {
	t.Helper()
	for range 100 {
		for _, id := range peers {
			if err := nodes[id].Tick(); err != nil {
				t.Fatal(err)
			}
		}
		settleManual(t, nodes, peers, net)
		for _, id := range peers {
			if nodes[id].IsLeader() {
				return nodes[id]
			}
		}
	}
	t.Fatal("no leader after 100 ticks")
	return nil
}

// TestManualModeElectsAndCommits drives three manual nodes from one
// goroutine: ticks elect a leader, a submitted command and a read barrier
// complete, and every node applies the same state.
func TestManualModeElectsAndCommits(t *testing.T) {
	peers := []uint64{1, 2, 3}
	net := &queueNet{}
	nodes := startManualNodes(t, peers, net)
	settle := func() { settleManual(t, nodes, peers, net) }
	lead := electManual(t, nodes, peers, net)
	f, err := lead.Submit(acquire(0, 0, "x"))
	if err != nil {
		t.Fatal(err)
	}
	settle()
	select {
	case <-f.Done():
	default:
		t.Fatal("proposal not applied after the network settled")
	}
	r, err := lead.StartRead()
	if err != nil {
		t.Fatal(err)
	}
	settle()
	select {
	case <-r.Done():
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	default:
		t.Fatal("read barrier did not pass")
	}
	for range 3 { // heartbeats carry the commit index to followers
		for _, id := range peers {
			_ = nodes[id].Tick()
		}
		settle()
	}
	want := hash(lead)
	for _, id := range peers {
		if got := hash(nodes[id]); got != want {
			t.Fatalf("node %d state %s, leader's %s", id, got, want)
		}
	}
	lead.View(func(m *fsm.Machine) {
		if m.AppliedIndex() == 0 {
			t.Fatal("nothing applied")
		}
	})
	for _, id := range peers {
		nodes[id].Stop() // returns at once in manual mode
		<-nodes[id].Done()
	}
}

// syncStore records, for each Save, whether it was asked to sync and
// whether a snapshot was saved just before it.
type syncStore struct {
	memStore
	afterSnap bool
	saves     []struct{ sync, afterSnap bool }
}

func (s *syncStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.saves = append(s.saves, struct{ sync, afterSnap bool }{sync, s.afterSnap})
	s.afterSnap = false
	return s.memStore.Save(hs, ents, sync)
}

func (s *syncStore) SaveSnapshot(snap *raftpb.Snapshot) error {
	s.afterSnap = true
	return s.memStore.SaveSnapshot(snap)
}

// TestSnapshotHardStateIsSynced: a follower that installs a snapshot from
// its leader must fsync the hard state (the new commit index) with it
// before it acknowledges, although raft's MustSync is false for a
// commit-only change. Otherwise a crash keeps the snapshot but loses the
// commit, the store's recovery (wal.ValidSnapshotEntries) drops the
// snapshot, the log regresses below what was acknowledged, and raft
// panics "tocommit(N) is out of range" (found by internal/sim).
func TestSnapshotHardStateIsSynced(t *testing.T) {
	st := &syncStore{}
	net := &queueNet{}
	obs := &seenObserver{applied: map[uint64]bool{}, flushed: make(chan struct{}, 1)}
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport, cfg.Observer = 2, []uint64{1, 2}, st, net, obs
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	settle := func() { runDry(t, n) }
	settle()
	data, err := fsm.New().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A heartbeat of term 2 first, so that the snapshot's Ready changes
	// only the commit index (MustSync false), as in the simulated failure.
	n.Step(&raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2))})
	settle()
	st.saves = nil
	n.Step(&raftpb.Message{Type: new(raftpb.MsgSnap), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2)),
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
			Index: new(uint64(10)), Term: new(uint64(2)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}},
		}}})
	settle()
	if len(st.saves) == 0 || !st.saves[0].afterSnap {
		t.Fatalf("saves %+v: want a hard state save right after the snapshot", st.saves)
	}
	if !st.saves[0].sync {
		t.Fatal("the hard state saved with a snapshot was not synced")
	}
	var acked bool
	for _, m := range net.msgs {
		acked = acked || (m.GetType() == raftpb.MsgAppResp && m.GetIndex() == 10)
	}
	if !acked {
		t.Fatalf("no acknowledgement of the snapshot in %v", net.msgs)
	}
	// The observer hears of it: watched locks may all have changed.
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.restored) != 1 || obs.restored[0] != 10 {
		t.Fatalf("observer told of restores %v, want [10]", obs.restored)
	}
}

// commitCheckStore flags a snapshot saved above every commit index the log
// holds so far: the store would not trust it after a crash
// (wal.ValidSnapshotEntries) and would fall back to an older one.
type commitCheckStore struct {
	memStore
	logged  uint64 // highest commit index saved in a hard state
	snaps   int
	badSnap string
}

func (s *commitCheckStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.logged = max(s.logged, hs.GetCommit())
	return s.memStore.Save(hs, ents, sync)
}

func (s *commitCheckStore) SaveSnapshot(snap *raftpb.Snapshot) error {
	s.snaps++
	if idx := snap.GetMetadata().GetIndex(); idx > s.logged && s.badSnap == "" {
		s.badSnap = fmt.Sprintf("snapshot at %d saved while the log's commit was %d", idx, s.logged)
	}
	return s.memStore.SaveSnapshot(snap)
}

// A snapshot of at least CollectAfterSnapshot bytes is followed by one
// collection (not one per snapshot while it runs); a smaller one is not,
// nor one encoded outside the Go heap (offHeap), whose memory went back
// to the OS when it was saved.
func TestCollectAfterALargeSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int
		finish    bool // the collection ends before the next snapshot
		mapped    bool // every encoding in a memory mapping
		want      func(calls, snaps int) bool
	}{
		{"every snapshot, each collection done", 1, true, false, func(c, s int) bool { return c == s }},
		{"one at a time", 1, false, false, func(c, s int) bool { return c == 1 }},
		{"all below the threshold", 1 << 30, true, false, func(c, s int) bool { return c == 0 }},
		{"off", 0, true, false, func(c, s int) bool { return c == 0 }},
		{"encoded off the heap", 1, true, true, func(c, s int) bool { return c == 0 || !offHeap{}.mapped(make([]byte, 0, 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mapped {
				defer func(n int) { mappedMin = n }(mappedMin)
				mappedMin = 1
			}
			st := &commitCheckStore{}
			cfg := DefaultConfig()
			cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, st, &queueNet{}
			cfg.SnapshotEntries, cfg.CatchUpEntries = 3, 1
			cfg.CollectAfterSnapshot = tc.threshold
			n, err := StartManual(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Stop()
			calls := 0
			n.collect = func(done func()) {
				calls++
				if tc.finish {
					done()
				}
			}
			runDry(t, n)
			for i := range 12 {
				if _, err := n.Submit(acquire(0, 0, fmt.Sprintf("k%d", i))); err != nil {
					t.Fatal(err)
				}
				runDry(t, n)
			}
			if st.snaps < 2 {
				t.Fatalf("%d snapshots: the test proves nothing", st.snaps)
			}
			if !tc.want(calls, st.snaps) {
				t.Fatalf("%d collections after %d snapshots", calls, st.snaps)
			}
			// The store's copy of the last one is whole.
			if err := fsm.New().Restore(st.snap.GetData()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A snapshot received from the leader is followed by a collection too.
func TestCollectAfterAReceivedSnapshot(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 2, []uint64{1, 2}, &syncStore{}, &queueNet{}
	cfg.CollectAfterSnapshot = 1
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	n.collect = func(done func()) { calls++; done() }
	runDry(t, n)
	if calls != 0 {
		t.Fatalf("%d collections before any snapshot", calls)
	}
	// Not empty: an empty state's snapshot is zero bytes.
	data, err := proto.Marshal(&fsmpb.Snapshot{AppliedIndex: 10})
	if err != nil {
		t.Fatal(err)
	}
	n.Step(&raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2))})
	runDry(t, n)
	n.Step(&raftpb.Message{Type: new(raftpb.MsgSnap), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2)),
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
			Index: new(uint64(10)), Term: new(uint64(2)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}},
		}}})
	runDry(t, n)
	if calls != 1 {
		t.Fatalf("%d collections after one received snapshot, want 1", calls)
	}
}

// TestSnapshotLetsAppliesGoOn steps through a snapshot in manual mode:
// what commits while the state machine is frozen but not yet encoded, and
// while the encoding is being saved, is applied at once; the snapshot that
// reaches the store and raft's storage is the state at its index, without
// those entries.
func TestSnapshotLetsAppliesGoOn(t *testing.T) {
	cfg := DefaultConfig()
	st := &memStore{}
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, st, &queueNet{}
	cfg.SnapshotEntries, cfg.CatchUpEntries = 10, 5
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// pump runs the loop and completes writes, never the snapshot.
	pump := func() {
		for {
			did, err := n.Pump()
			if err == nil && !did && n.PendingWrites() {
				did, err = true, n.Persist()
			}
			if err != nil {
				t.Fatal(err)
			}
			if !did {
				return
			}
		}
	}
	for i := 0; !n.IsLeader(); i++ {
		if i == 100 {
			t.Fatal("no leader after 100 ticks")
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		pump()
	}
	// submit proposes cmd and runs the node until it is applied.
	submit := func(cmd *fsmpb.Command) (*fsmpb.Result, uint64) {
		t.Helper()
		f, err := n.Submit(cmd)
		if err != nil {
			t.Fatal(err)
		}
		pump()
		select {
		case <-f.Done():
		default:
			t.Fatalf("%v: not applied", cmd)
		}
		res, index, err := f.Wait(context.Background())
		if err != nil || fsm.ErrorOf(res) != nil {
			t.Fatalf("%v: %v %v", cmd, res, err)
		}
		return res, index
	}
	open, _ := submit(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "a"}}})
	s := open.GetSessionId()
	indexOf := map[string]uint64{}
	for i := 1; !n.SnapshotPending(); i++ {
		if i == 200 {
			t.Fatal("no snapshot after 200 entries")
		}
		name := fmt.Sprintf("k%d", i)
		_, indexOf[name] = submit(acquire(s, 0, name))
	}
	_, indexOf["during-encoding"] = submit(acquire(s, 0, "during-encoding"))
	n.FinishSnapshot() // encoded
	pump()
	if !n.SnapshotPending() {
		t.Fatal("the snapshot's save is not pending after its encoding")
	}
	_, indexOf["during-save"] = submit(acquire(s, 0, "during-save"))
	if st.snap != nil {
		t.Fatal("the snapshot reached the store before its save step")
	}
	n.FinishSnapshot() // saved
	pump()
	if n.SnapshotPending() || st.snap == nil || n.Metrics().Snapshots != 1 {
		t.Fatalf("after the save: pending %v, store's snapshot %v, snapshots %d",
			n.SnapshotPending(), st.snap.GetMetadata(), n.Metrics().Snapshots)
	}
	snapIndex := st.snap.GetMetadata().GetIndex()
	m := fsm.New()
	if err := m.Restore(st.snap.GetData()); err != nil {
		t.Fatal(err)
	}
	if m.AppliedIndex() != snapIndex {
		t.Fatalf("snapshot %d has the state applied to %d", snapIndex, m.AppliedIndex())
	}
	after := 0
	for name, index := range indexOf {
		if _, ok := m.Lock(name); ok != (index <= snapIndex) {
			t.Errorf("lock %s, acquired by entry %d: in snapshot %d: %v", name, index, snapIndex, ok)
		}
		if index > snapIndex {
			after++
		}
	}
	if after < 2 {
		t.Fatalf("only %d acquires applied after snapshot %d", after, snapIndex)
	}
}

// TestSnapshotWhenEachWriteCarriesThePreviousCommit: commands one at a
// time, each submitted before the write that logs the previous one's
// commit, so that every write carries the commit of the entry before its
// own. A snapshot must wait for a logged commit at its index; checked
// only after each turn's apply, that never held (the turn that follows a
// write applies the entry it committed) and no snapshot was ever taken.
// Found by TestSnapshotDoesNotStopTheLoop failing on a busy machine.
func TestSnapshotWhenEachWriteCarriesThePreviousCommit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &queueNet{}
	cfg.SnapshotEntries, cfg.CatchUpEntries = 10, 5
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !n.IsLeader(); i++ {
		if i == 100 {
			t.Fatal("no leader after 100 ticks")
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
	}
	// submit runs the node until cmd is applied and no further: the write
	// of its commit stays queued, to go with the next command's entry.
	submit := func(cmd *fsmpb.Command) *fsmpb.Result {
		t.Helper()
		f, err := n.Submit(cmd)
		if err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case <-f.Done():
				res, _, err := f.Wait(context.Background())
				if err != nil || fsm.ErrorOf(res) != nil {
					t.Fatalf("%v: %v %v", cmd, res, err)
				}
				return res
			default:
			}
			did, err := n.Pump()
			if err == nil && !did {
				if !n.PendingWrites() {
					t.Fatalf("%v: not applied, and nothing to do", cmd)
				}
				err = n.Persist()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	s := submit(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "a"}}}).GetSessionId()
	for i := 1; !n.SnapshotPending(); i++ {
		if i == 100 {
			t.Fatal("no snapshot after 100 entries, with one due every 10")
		}
		submit(acquire(s, 0, fmt.Sprintf("k%d", i)))
	}
}

// TestLeaderLeavesOutCommitOnlyAppends: after a command commits, the
// leader sends up-to-date followers no append that only carries the new
// commit index (they learn it from the next append or heartbeat); a
// follower whose append was lost still catches up on heartbeats alone;
// after a membership change commits, the leader sends its commit, and the
// followers apply the change without waiting for a heartbeat (a leader
// that removed itself would not send one).
func TestLeaderLeavesOutCommitOnlyAppends(t *testing.T) {
	peers := []uint64{1, 2, 3}
	net := &queueNet{}
	nodes := startManualNodes(t, peers, net)
	var sent []*raftpb.Message            // what settle delivered
	var lose func(m *raftpb.Message) bool // what it lost instead
	settle := func() {
		for busy := true; busy; {
			busy = false
			for _, id := range peers {
				if nodes[id] != nil && runDry(t, nodes[id]) {
					busy = true
				}
			}
			msgs := net.msgs
			net.msgs = nil
			for _, m := range msgs {
				if lose != nil && lose(m) {
					continue
				}
				sent = append(sent, m)
				if to := nodes[m.GetTo()]; to != nil {
					to.Step(m)
					busy = true
				}
			}
		}
	}
	tick := func() {
		for _, id := range peers {
			if err := nodes[id].Tick(); err != nil {
				t.Fatal(err)
			}
		}
		settle()
	}
	var lead *Node
	for i := 0; lead == nil; i++ {
		if i == 100 {
			t.Fatal("no leader after 100 ticks")
		}
		tick()
		for _, id := range peers {
			if nodes[id].IsLeader() {
				lead = nodes[id]
			}
		}
	}
	tick() // every follower acknowledged the leader's first entry
	commitOnlyTo := func(id uint64) (n int) {
		for _, m := range sent {
			if m.GetFrom() == lead.cfg.ID && m.GetTo() == id && commitOnly(m) {
				n++
			}
		}
		return n
	}

	sent = nil
	f, err := lead.Submit(acquire(0, 0, "x"))
	if err != nil {
		t.Fatal(err)
	}
	settle()
	select {
	case <-f.Done():
	default:
		t.Fatal("the command was not applied")
	}
	for _, id := range peers {
		if id != lead.cfg.ID && commitOnlyTo(id) != 0 {
			t.Errorf("after a command, the leader sent %d appends with only a commit index to %d", commitOnlyTo(id), id)
		}
	}

	// A follower whose append was lost is found out by the empty append
	// raft sends when it answers a heartbeat, and catches up with no
	// command after it.
	// A follower: the one that misses an append below, and later the
	// member removed.
	follower := uint64(1)
	if follower == lead.cfg.ID {
		follower = 2
	}
	behind := follower
	lose = func(m *raftpb.Message) bool { return m.GetTo() == behind && len(m.GetEntries()) > 0 }
	if _, err := lead.Submit(acquire(0, 0, "y")); err != nil {
		t.Fatal(err)
	}
	settle()
	lose = nil
	for i := 0; nodes[behind].Status().Applied < lead.Status().Applied; i++ {
		if i == 50 {
			t.Fatalf("member %d applied %d after 50 ticks, the leader %d", behind, nodes[behind].Status().Applied, lead.Status().Applied)
		}
		tick()
	}

	gone := follower
	nodes[gone] = nil // it need not take part, and would stop once removed
	sent = nil
	cf, err := lead.ProposeMembership(&raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: &gone})
	if err != nil {
		t.Fatal(err)
	}
	settle()
	select {
	case <-cf.Done():
	default:
		t.Fatal("the membership change was not applied")
	}
	var stayed []uint64 // the followers still members
	for _, id := range peers {
		if id != lead.cfg.ID && id != gone {
			stayed = append(stayed, id)
		}
	}
	for _, id := range stayed {
		if commitOnlyTo(id) == 0 {
			t.Errorf("the leader did not send %d the commit of the membership change", id)
		}
		if ms := nodes[id].Membership(); ms.Has(gone) {
			t.Errorf("member %d still has %d as a voter without a heartbeat: %v", id, gone, ms.Voters)
		}
	}

	// Only a leader needs the indexes whose commit goes at once: a
	// follower forgets those it applied, rather than keep maxMustTell.
	if _, err := lead.Submit(acquire(0, 0, "z")); err != nil {
		t.Fatal(err)
	}
	settle()
	for _, id := range stayed {
		if n := nodes[id]; len(n.mustTell) != 0 {
			t.Errorf("follower %d keeps indexes %v, applied %d", id, n.mustTell, n.Status().Applied)
		}
	}
}
