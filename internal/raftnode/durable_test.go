package raftnode

import (
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
)

// The tests here hold raftnode to "durable before anyone hears of it": a
// vote, an entry, the commit that covers a snapshot reach the disk, synced
// where a crash could lose them, before a peer is told or a later write
// could land without them.

// diskAndWire is a member's store and its transport in one: it records, in
// the order they happen, each write and each message sent, so a test can
// tell which came first.
type diskAndWire struct {
	memStore
	events []diskOrWire
}

// diskOrWire is one write (save or snapshot) or one message sent.
type diskOrWire struct {
	save bool
	hs   *raftpb.HardState // save: nil if it had none
	ents int               // save: the entries it wrote
	sync bool              // save
	snap uint64            // the index of a snapshot written, else 0
	msg  *raftpb.Message   // sent
}

func (d *diskAndWire) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	ev := diskOrWire{save: true, ents: len(ents), sync: sync}
	if hs != nil {
		ev.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	d.events = append(d.events, ev)
	return d.memStore.Save(hs, ents, sync)
}

func (d *diskAndWire) SaveSnapshot(snap *raftpb.Snapshot) error {
	d.events = append(d.events, diskOrWire{snap: snap.GetMetadata().GetIndex()})
	return d.memStore.SaveSnapshot(snap)
}

func (d *diskAndWire) Send(_ uint64, msgs []*raftpb.Message) {
	for _, m := range msgs {
		d.events = append(d.events, diskOrWire{msg: proto.Clone(m).(*raftpb.Message)})
	}
}

func (e diskOrWire) String() string {
	switch {
	case e.msg != nil:
		return fmt.Sprintf("send %v to %d", e.msg.GetType(), e.msg.GetTo())
	case e.snap != 0:
		return fmt.Sprintf("snapshot %d", e.snap)
	}
	return fmt.Sprintf("save term=%d vote=%d commit=%d entries=%d sync=%v",
		e.hs.GetTerm(), e.hs.GetVote(), e.hs.GetCommit(), e.ents, e.sync)
}

// startFollower starts member 2 of {1, 2}, in manual mode, on d, and runs
// it until it has nothing left to do.
func startFollower(t *testing.T, d *diskAndWire) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 2, []uint64{1, 2}, d, d
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	runDry(t, n)
	return n
}

// pumpOnly runs n's loop until it is idle, leaving its writes pending.
func pumpOnly(t *testing.T, n *Node) {
	t.Helper()
	for {
		did, err := n.Pump()
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			return
		}
	}
}

// TestVoteIsDurableBeforeItIsSent: a member grants its vote only once the
// vote (and the term) is synced to its disk; a vote lost in a crash could
// be given again, to another candidate of the same term.
func TestVoteIsDurableBeforeItIsSent(t *testing.T) {
	d := &diskAndWire{}
	n := startFollower(t, d)
	d.events = nil
	n.Step(&raftpb.Message{Type: new(raftpb.MsgVote), From: new(uint64(1)), To: new(uint64(2)),
		Term: new(uint64(2)), LogTerm: new(uint64(2)), Index: new(uint64(100))})
	pumpOnly(t, n)
	if !n.PendingWrites() {
		t.Fatalf("no write pending after a vote request; events %v", d.events)
	}
	for _, e := range d.events {
		if e.msg.GetType() == raftpb.MsgVoteResp {
			t.Fatalf("the vote was sent before it was written: %v", d.events)
		}
	}
	runDry(t, n)
	synced := false
	for _, e := range d.events {
		if e.save && e.hs.GetTerm() == 2 && e.hs.GetVote() == 1 {
			synced = e.sync
		}
		if e.msg.GetType() == raftpb.MsgVoteResp {
			if e.msg.GetReject() {
				t.Fatalf("vote refused: the test proves nothing; events %v", d.events)
			}
			if !synced {
				t.Fatalf("the vote was sent before it was synced: %v", d.events)
			}
			return
		}
	}
	t.Fatalf("no vote sent: %v", d.events)
}

// TestEntriesAfterASnapshotWaitForItsCommit: when a snapshot and entries
// after it reach the append worker in one batch, the hard state that
// commits the snapshot is written and synced on its own, before them. A
// crash in the middle of one merged write could otherwise keep entries
// after the snapshot without that hard state; recovery, which trusts only
// a snapshot the logged commit covers, would fall back to an older one and
// find a hole in the log.
func TestEntriesAfterASnapshotWaitForItsCommit(t *testing.T) {
	d := &diskAndWire{}
	n := startFollower(t, d)
	data, err := fsm.New().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A heartbeat of term 2 first, so that the snapshot's hard state
	// moves the commit index only.
	n.Step(&raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2))})
	runDry(t, n)
	d.events = nil
	n.Step(&raftpb.Message{Type: new(raftpb.MsgSnap), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2)),
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
			Index: new(uint64(10)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}},
		}}})
	pumpOnly(t, n)
	n.Step(&raftpb.Message{Type: new(raftpb.MsgApp), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2)),
		LogTerm: new(uint64(2)), Index: new(uint64(10)), Commit: new(uint64(12)),
		Entries: []*raftpb.Entry{
			{Term: new(uint64(2)), Index: new(uint64(11)), Type: new(raftpb.EntryNormal)},
			{Term: new(uint64(2)), Index: new(uint64(12)), Type: new(raftpb.EntryNormal)},
		}})
	pumpOnly(t, n)
	if len(d.events) != 0 {
		t.Fatalf("written before Persist: %v", d.events)
	}
	runDry(t, n)
	snapAt, entriesAt := -1, -1
	for i, e := range d.events {
		switch {
		case e.snap == 10 && snapAt < 0:
			snapAt = i
		case e.save && e.ents > 0 && entriesAt < 0:
			entriesAt = i
		}
	}
	if snapAt < 0 || entriesAt < snapAt {
		t.Fatalf("want the snapshot written, then the entries after it: %v", d.events)
	}
	next := d.events[snapAt+1]
	if !next.save || next.ents != 0 || next.hs.GetCommit() < 10 || !next.sync {
		t.Fatalf("after the snapshot, %v; want the hard state committing it, synced, alone: %v", next, d.events)
	}
}

// TestSnapshotWaitsForTheCommitToBeWritten: a member applies what is
// committed before the hard state carrying that commit is written (the
// append worker writes it while the loop goes on), and takes no snapshot
// in that gap: saved before the write, such a snapshot would be above
// every commit the log holds, and recovery would not trust it. The
// simulation cannot see this on its own: the store also keeps the
// previous snapshot's log, so recovery survives it.
func TestSnapshotWaitsForTheCommitToBeWritten(t *testing.T) {
	st := &commitCheckStore{}
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, st, &queueNet{}
	// Snapshot points every 3 entries: the first at the submitted entry
	// (after the membership entry and the leader's empty one).
	cfg.SnapshotEntries, cfg.CatchUpEntries = 3, 1
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	runDry(t, n)
	if !n.IsLeader() || n.Status().Applied != 2 || n.SnapshotPending() {
		t.Fatalf("a lone voter elected itself: %+v, snapshot pending %v; want leading at index 2, no snapshot pending", n.Status(), n.SnapshotPending())
	}
	f, err := n.Submit(acquire(0, 0, "x"))
	if err != nil {
		t.Fatal(err)
	}
	pumpOnly(t, n) // the entry goes to the append worker
	if err := n.Persist(); err != nil {
		t.Fatal(err)
	}
	pumpOnly(t, n) // durable, so committed and applied; its commit is not written yet
	select {
	case <-f.Done():
	default:
		t.Fatal("the entry was not applied once written")
	}
	if !n.PendingWrites() {
		t.Fatal("no write pending after the apply: the test proves nothing")
	}
	if n.SnapshotPending() {
		t.Fatalf("a snapshot was taken at the applied index %d while the log's commit is %d", n.Status().Applied, st.logged)
	}
	// Once the commit is written, the next Ready takes it.
	runDry(t, n)
	if _, err := n.Submit(acquire(0, 0, "y")); err != nil {
		t.Fatal(err)
	}
	runDry(t, n)
	if st.snaps == 0 {
		t.Fatal("no snapshot once the commit was written: the test proves nothing")
	}
	if st.badSnap != "" {
		t.Fatal(st.badSnap)
	}
}
