package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func TestSingleNodeTokenIsEntryIndex(t *testing.T) {
	n := startNode(t, 1, []uint64{1}, &memStore{}, &memNet{nodes: map[uint64]*Node{}})
	defer n.Stop()
	waitLeader(t, n)
	s := open(t, n, "a")
	res, index, err := n.Propose(context.Background(), acquire(s, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetAcquire().GetToken(); got != index {
		t.Fatalf("token %d, want the granting entry's index %d", got, index)
	}
}

// gatedStore blocks Save while its gate is closed, so a test can make
// proposals queue up behind one write.
type gatedStore struct {
	memStore
	armed   atomic.Bool
	gate    chan struct{}
	blocked chan struct{} // receives once a Save waits at the gate
}

func (s *gatedStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if len(ents) > 0 && s.armed.Load() {
		select {
		case s.blocked <- struct{}{}:
		default:
		}
		<-s.gate
	}
	return s.memStore.Save(hs, ents, sync)
}

// Proposals that arrive while the log is being written go to disk together
// in the next write, with one fsync (group commit), however the loop
// happened to step them into raft.
func TestProposalsQueuedDuringAWriteShareOneBatch(t *testing.T) {
	st := &gatedStore{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
	n := startLone(t, st)
	s := open(t, n, "a")

	before := n.Metrics() // published at the end of each Ready: settled now
	st.armed.Store(true)
	first, err := n.Submit(acquire(s, 1, "k0"))
	if err != nil {
		t.Fatal(err)
	}
	<-st.blocked // the loop is inside the write of the first proposal
	const queued = 200
	futures := make([]*Future, queued)
	for i := range futures {
		cmd := acquire(s, uint64(i+2), fmt.Sprintf("k%d", i+1))
		cmd.MinUnackedSeq = 1
		if futures[i], err = n.Submit(cmd); err != nil {
			t.Fatal(err)
		}
	}
	// The loop is free while the worker writes: wait until it has handed
	// all of them to the worker (Metrics is published after a Ready's
	// work is handed over), then let the first write finish.
	for deadline := time.Now().Add(10 * time.Second); n.Metrics().Proposals-before.Proposals < queued+1; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d proposals stepped", n.Metrics().Proposals-before.Proposals, queued+1)
		}
		time.Sleep(time.Millisecond)
	}
	close(st.gate)
	for _, f := range append(futures, first) {
		res, _, err := f.Wait(context.Background())
		if err == nil {
			err = fsm.ErrorOf(res)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	after := n.Metrics()
	// One write for the first proposal, one for all that queued behind it.
	if fsyncs := after.Fsyncs - before.Fsyncs; fsyncs != 2 {
		t.Fatalf("%d fsyncs for the first proposal and the %d queued behind it, want 2", fsyncs, queued)
	}
	if saved := after.EntriesSaved - before.EntriesSaved; saved != queued+1 {
		t.Fatalf("%d entries saved, want %d", saved, queued+1)
	}
}

func TestFollowerRefusesWithLeaderHint(t *testing.T) {
	net := &memNet{nodes: map[uint64]*Node{}}
	peers := []uint64{1, 2, 3}
	nodes := make([]*Node, 3)
	for i := range nodes {
		nodes[i] = startNode(t, peers[i], peers, &memStore{}, net)
		defer nodes[i].Stop()
	}
	lead := waitLeader(t, nodes...)
	for _, n := range nodes {
		if n == lead {
			continue
		}
		// The follower may need a heartbeat to learn the leader.
		var err error
		for range 200 {
			_, _, err = n.Propose(context.Background(), acquire(1, 1, "x"))
			var nl *NotLeaderError
			if errors.As(err, &nl) && nl.Leader == lead.ID() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		var nl *NotLeaderError
		if !errors.As(err, &nl) || nl.Leader != lead.ID() {
			t.Fatalf("follower propose: %v, want NotLeaderError{%x}", err, lead.ID())
		}
	}
}

func TestRestartReplaysEveryAcknowledgedCommand(t *testing.T) {
	net := &memNet{nodes: map[uint64]*Node{}}
	peers := []uint64{1, 2, 3}
	stores := []*memStore{{}, {}, {}}
	nodes := make([]*Node, 3)
	for i := range nodes {
		nodes[i] = startNode(t, peers[i], peers, stores[i], net)
	}
	lead := waitLeader(t, nodes...)
	s := open(t, lead, "a")
	for i := range 100 { // > SnapshotEntries: snapshots and compaction happen
		res, _, err := lead.Propose(context.Background(), acquire(s, uint64(i+1), fmt.Sprintf("k%d", i)))
		if err != nil || fsm.ErrorOf(res) != nil {
			t.Fatalf("acquire %d: %v %v", i, err, res)
		}
	}
	want := hash(lead)
	for i := range nodes {
		nodes[i].Stop()
		net.set(peers[i], nil)
	}
	for i := range nodes {
		nodes[i] = startNode(t, peers[i], peers, stores[i], net)
		defer nodes[i].Stop()
	}
	lead = waitLeader(t, nodes...)
	if got := hash(lead); got != want {
		// The new leader may still be applying its term's first entry.
		t.Fatalf("state after restart %s, want %s", got, want)
	}
	lead.View(func(m *fsm.Machine) {
		if m.NumLocks() != 100 {
			t.Fatalf("locks after restart: %d, want 100", m.NumLocks())
		}
	})
}

func hash(n *Node) string {
	var h string
	n.View(func(m *fsm.Machine) { h = m.Hash() })
	return h
}

func BenchmarkPropose(b *testing.B) {
	for _, workers := range []int{1, 64} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			n := startNode(b, 1, []uint64{1}, &memStore{}, &memNet{nodes: map[uint64]*Node{}})
			defer n.Stop()
			waitLeader(b, n)
			s := open(b, n, "bench")
			var seq sync.Mutex
			next := uint64(0)
			b.ReportAllocs()
			b.SetParallelism(workers)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq.Lock()
					next++
					q := next
					seq.Unlock()
					if _, _, err := n.Propose(context.Background(), acquire(s, 0, fmt.Sprintf("k%d", q%1000))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// SubmitFunc calls done exactly once: with the result when the entry
// applies, and with ErrStopped for what is still in flight at Stop.
func TestSubmitFuncCallsDoneOnce(t *testing.T) {
	st := &gatedStore{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
	n := startLone(t, st)
	s := open(t, n, "a")

	type outcome struct {
		res   *fsmpb.Result
		index uint64
		err   error
	}
	applied := make(chan outcome, 2)
	if err := n.SubmitFunc(acquire(s, 1, "k"), func(res *fsmpb.Result, index uint64, err error) {
		applied <- outcome{res, index, err}
	}); err != nil {
		t.Fatal(err)
	}
	o := <-applied
	if o.err != nil || o.res.GetAcquire().GetToken() != o.index {
		t.Fatalf("done(%v, %d, %v): want the grant with token = index", o.res, o.index, o.err)
	}

	st.armed.Store(true) // the next write hangs: the proposal stays in flight
	stopped := make(chan outcome, 2)
	if err := n.SubmitFunc(acquire(s, 2, "j"), func(res *fsmpb.Result, index uint64, err error) {
		stopped <- outcome{res, index, err}
	}); err != nil {
		t.Fatal(err)
	}
	<-st.blocked
	// Stop fails what is in flight, then waits for the append worker,
	// which the gate holds until done has been called.
	got := make(chan outcome, 1)
	go func() {
		got <- <-stopped
		close(st.gate)
	}()
	n.Stop()
	if o := <-got; !errors.Is(o.err, ErrStopped) {
		t.Fatalf("done after Stop: %v, want ErrStopped", o.err)
	}
	select {
	case o := <-applied:
		t.Fatalf("done called twice: %v", o)
	case o := <-stopped:
		t.Fatalf("done called twice: %v", o)
	default:
	}
}

// After the loop has stopped on a storage error, proposals are refused at
// once instead of queueing where nothing will ever complete them.
func TestSubmitAfterStorageFailureIsRefused(t *testing.T) {
	st := &failingStore{}
	n := startLone(t, st)
	s := open(t, n, "a")
	st.fail.Store(true)
	if _, _, err := n.Propose(context.Background(), acquire(s, 1, "k")); !errors.Is(err, ErrStopped) {
		t.Fatalf("proposal whose write fails: %v, want ErrStopped", err)
	}
	<-n.Done()
	called := make(chan error, 1)
	err := n.SubmitFunc(acquire(s, 2, "j"), func(_ *fsmpb.Result, _ uint64, err error) { called <- err })
	if err == nil {
		select {
		case err = <-called:
		case <-time.After(10 * time.Second):
			t.Fatal("SubmitFunc after the loop stopped: accepted and never completed")
		}
	}
	if !errors.Is(err, ErrStopped) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SubmitFunc after the loop stopped: %v, want ErrStopped or ErrNotLeader", err)
	}
}

// failingStore fails every Save with entries once armed.
type failingStore struct {
	memStore
	fail atomic.Bool
}

func (s *failingStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if s.fail.Load() && len(ents) > 0 {
		return errors.New("disk full")
	}
	return s.memStore.Save(hs, ents, sync)
}

// seenObserver records the indexes the Observer was told of.
type seenObserver struct {
	mu       sync.Mutex
	applied  map[uint64]bool
	flushes  int
	flushed  chan struct{} // signalled (capacity 1) at every Flush
	restored []uint64
}

func (o *seenObserver) Applied(index uint64, _ *fsmpb.Command, _ *fsmpb.Result) {
	o.mu.Lock()
	o.applied[index] = true
	o.mu.Unlock()
}
func (o *seenObserver) LeaderChanged(bool, uint64, *fsm.Machine) {}
func (o *seenObserver) Restored(index uint64) {
	o.mu.Lock()
	o.restored = append(o.restored, index)
	o.mu.Unlock()
}
func (o *seenObserver) Flush() {
	o.mu.Lock()
	o.flushes++
	o.mu.Unlock()
	select {
	case o.flushed <- struct{}{}:
	default:
	}
}

// The Observer hears of an entry before its proposer does: a client told
// that its session exists must find the leader's liveness tracker knowing
// it (a keepalive sent right after an open was once refused as "session
// lost"), and answers queued by completions are flushed after the batch.
func TestObserverHearsBeforeTheProposer(t *testing.T) {
	obs := &seenObserver{applied: map[uint64]bool{}, flushed: make(chan struct{}, 1)}
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &memNet{nodes: map[uint64]*Node{}}
	cfg.TickInterval = 5 * time.Millisecond
	cfg.Observer = obs
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	waitLeader(t, n)
	s := open(t, n, "a")
	type seen struct {
		index         uint64
		observed      bool
		flushesBefore int
	}
	got := make(chan seen, 1)
	if err := n.SubmitFunc(acquire(s, 1, "k"), func(_ *fsmpb.Result, index uint64, err error) {
		if err != nil {
			t.Errorf("acquire: %v", err)
		}
		obs.mu.Lock()
		got <- seen{index, obs.applied[index], obs.flushes}
		obs.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	g := <-got
	if !g.observed {
		t.Fatalf("entry %d completed before the Observer was told of it", g.index)
	}
	timeout := time.After(10 * time.Second)
	for {
		obs.mu.Lock()
		f := obs.flushes
		obs.mu.Unlock()
		if f > g.flushesBefore {
			return
		}
		select {
		case <-obs.flushed:
		case <-timeout:
			t.Fatal("no Flush after the batch that completed the acquire")
		}
	}
}

// snapGatedStore blocks SaveSnapshot until its gate opens.
type snapGatedStore struct {
	memStore
	gate    chan struct{}
	blocked chan struct{} // closed once a SaveSnapshot waits at the gate
	once    sync.Once
}

func (s *snapGatedStore) SaveSnapshot(snap *raftpb.Snapshot) error {
	s.once.Do(func() { close(s.blocked) })
	<-s.gate
	return s.memStore.SaveSnapshot(snap)
}

// startSnapshotting starts a single member on st, with fast ticks and a
// snapshot every entries entries.
func startSnapshotting(t *testing.T, st LogStore, entries uint64) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, st, &memNet{nodes: map[uint64]*Node{}}
	cfg.TickInterval = 5 * time.Millisecond
	cfg.SnapshotEntries, cfg.CatchUpEntries = entries, 5
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A snapshot is encoded and saved off the loop: while it is being saved,
// the loop goes on committing (so heartbeats and elections go on too) and
// applying, since the save needs nothing from the state machine. With the
// snapshot on the loop nothing committed; with applies deferred until the
// save, the command below was not applied.
func TestSnapshotDoesNotStopTheLoop(t *testing.T) {
	st := &snapGatedStore{gate: make(chan struct{}), blocked: make(chan struct{})}
	n := startSnapshotting(t, st, 10)
	defer n.Stop()
	defer func() {
		select {
		case <-st.gate:
		default:
			close(st.gate)
		}
	}()
	waitLeader(t, n)
	s := open(t, n, "a")
	// Commands one at a time until a snapshot's save starts (a snapshot
	// waits for a logged commit index, which the next write after the
	// apply carries).
	for i := 1; ; i++ {
		f, err := n.Submit(acquire(s, uint64(i), fmt.Sprintf("k%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-st.blocked:
		case <-f.Done():
			if i == 200 {
				t.Fatal("no snapshot after 200 entries")
			}
			continue
		}
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, _, err := n.Propose(ctx, acquire(s, 1000, "during-snapshot"))
	if err != nil || res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
		t.Fatalf("acquire while the snapshot was being saved: %v %v", res, err)
	}
	if got := n.Metrics().Snapshots; got != 0 {
		t.Fatalf("%d snapshots counted before the save returned", got)
	}
	close(st.gate)
	for deadline := time.Now().Add(10 * time.Second); n.Metrics().Snapshots == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot was not recorded after its save returned")
		}
	}
	res, _, err = n.Propose(ctx, acquire(s, 1001, "after-snapshot"))
	if err != nil || res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
		t.Fatalf("acquire after the snapshot: %v %v", res, err)
	}
}

// Snapshot points: every SnapshotEntries entries, shifted per member so
// that the members of a group take theirs at different indexes.
func TestSnapshotPoints(t *testing.T) {
	voters := []uint64{0x9c, 0x12, 0x5e}
	offsets := map[uint64]uint64{}
	for _, id := range voters {
		offsets[id] = snapshotOffset(id, voters, 100_000)
	}
	if offsets[0x12] != 0 || offsets[0x5e] != 33_333 || offsets[0x9c] != 66_666 {
		t.Fatalf("offsets %v, want 0, 33333 and 66666 by sorted id", offsets)
	}
	if got := snapshotOffset(7, voters, 100_000); got != 0 {
		t.Errorf("a learner's offset is %d, want 0", got)
	}
	if got := snapshotOffset(7, []uint64{7}, 100_000); got != 0 {
		t.Errorf("a single member's offset is %d, want 0", got)
	}
	// Each member's points over 350,000 entries, snapshotting as soon as
	// one is due (the loop checks after every Ready).
	points := map[uint64][]uint64{}
	for id, off := range offsets {
		snap := uint64(0)
		for applied := uint64(1); applied <= 350_000; applied++ {
			if snapshotDue(applied, snap, 100_000, off) {
				snap = applied
				points[id] = append(points[id], applied)
			}
		}
	}
	want := map[uint64][]uint64{
		0x12: {100_000, 200_000, 300_000},
		0x5e: {33_333, 133_333, 233_333, 333_333},
		0x9c: {66_666, 166_666, 266_666},
	}
	for id, w := range want {
		if !slices.Equal(points[id], w) {
			t.Errorf("member %x snapshots at %v, want %v", id, points[id], w)
		}
	}
	// A snapshot taken late (the loop was busy, or one came from the
	// leader) does not shift the next point.
	if !snapshotDue(200_000, 150_000, 100_000, 0) || snapshotDue(199_999, 150_000, 100_000, 0) {
		t.Error("after a snapshot at 150,000 the next point of offset 0 is not 200,000")
	}
}

// logStore is a memStore that also keeps every entry ever saved (the last
// write of each index) and every snapshot saved.
type logStore struct {
	memStore
	all   map[uint64]*raftpb.Entry
	snaps []*raftpb.Snapshot
}

func (s *logStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.mu.Lock()
	for _, e := range ents {
		s.all[e.GetIndex()] = proto.Clone(e).(*raftpb.Entry)
	}
	s.mu.Unlock()
	return s.memStore.Save(hs, ents, sync)
}

func (s *logStore) SaveSnapshot(snap *raftpb.Snapshot) error {
	s.mu.Lock()
	s.snaps = append(s.snaps, proto.Clone(snap).(*raftpb.Snapshot))
	s.mu.Unlock()
	return s.memStore.SaveSnapshot(snap)
}

// Snapshots taken while commands are applied, by the goroutines a member
// runs: every snapshot saved must be the state at its index, byte for
// byte, as replaying the log up to that index gives it. The state is a
// few thousand locks, so that encodings and applies overlap (with -race
// in CI, the race detector watches them).
func TestSnapshotsWhileApplying(t *testing.T) {
	st := &logStore{all: map[uint64]*raftpb.Entry{}}
	n := startSnapshotting(t, st, 50)
	defer n.Stop()
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const workers, cycles, held = 8, 60, 400
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		s := open(t, n, fmt.Sprintf("w%d", w))
		wg.Go(func() {
			// A few hundred held locks each, then acquire and release
			// cycles, sequenced, so that the session's cached results
			// change too.
			names := make([]string, held)
			for i := range names {
				names[i] = fmt.Sprintf("held/%d/%d", w, i)
			}
			seq := uint64(1)
			if _, _, err := n.Propose(ctx, &fsmpb.Command{SessionId: s, Seq: seq,
				Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: names}}}); err != nil {
				errs <- err
				return
			}
			// At least cycles each, and on until three snapshots were
			// saved: on a busy machine the first ones take longer than
			// the cycles (ctx bounds it).
			for c := 0; c < cycles || n.Metrics().Snapshots < 3; c++ {
				name := fmt.Sprintf("cycle/%d/%d", w, c%7)
				seq++
				res, _, err := n.Propose(ctx, acquire(s, seq, name))
				if err != nil {
					errs <- err
					return
				}
				seq++
				if _, _, err := n.Propose(ctx, &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Release{
					Release: &fsmpb.Release{Lock: name, Token: res.GetAcquire().GetToken()}}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The last snapshot's save may still run: wait for it to be counted.
	st.mu.Lock()
	taken := len(st.snaps)
	st.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); n.Metrics().Snapshots < uint64(taken); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a snapshot's save did not end")
		}
	}
	n.Stop()

	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.snaps) < 3 {
		t.Fatalf("only %d snapshots taken", len(st.snaps))
	}
	replay := fsm.New()
	for _, snap := range st.snaps {
		idx := snap.GetMetadata().GetIndex()
		for i := replay.AppliedIndex() + 1; i <= idx; i++ {
			e := st.all[i]
			if e == nil {
				t.Fatalf("entry %d was never saved", i)
			}
			cmd := &fsmpb.Command{}
			if e.GetType() == raftpb.EntryConfChange {
				cc := &raftpb.ConfChange{}
				if err := proto.Unmarshal(e.GetData(), cc); err != nil {
					t.Fatal(err)
				}
				ApplyMembership(replay, i, cc) // the bootstrap's records
			} else if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
				replay.SetApplied(i)
			} else if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
				t.Fatal(err)
			} else {
				replay.Apply(i, cmd)
			}
		}
		want, _ := replay.Snapshot()
		if !bytes.Equal(snap.GetData(), want) {
			t.Fatalf("snapshot at %d (%d bytes) is not the state at %d (%d bytes)", idx, len(snap.GetData()), idx, len(want))
		}
	}
	t.Logf("%d snapshots checked, the last at %d with %d locks", len(st.snaps), replay.AppliedIndex(), replay.NumLocks())
}

// TestEntryFromANewerReleaseStopsTheMember: an entry whose command has a
// field this release does not know (a leader of a newer release wrote it)
// is not applied without that field, which would part this member's state
// from the others': the member stops, and the entry is not applied.
func TestEntryFromANewerReleaseStopsTheMember(t *testing.T) {
	for _, where := range []string{"command", "operation"} {
		t.Run(where, func(t *testing.T) {
			n := startNode(t, 1, []uint64{1}, &memStore{}, &memNet{nodes: map[uint64]*Node{}})
			defer n.Stop()
			waitLeader(t, n)
			s := open(t, n, "a")
			cmd := acquire(s, 1, "x")
			unknown := protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1)
			if where == "command" {
				cmd.ProtoReflect().SetUnknown(unknown)
			} else {
				cmd.GetAcquire().ProtoReflect().SetUnknown(unknown)
			}
			if _, _, err := n.Propose(context.Background(), cmd); !errors.Is(err, ErrStopped) {
				t.Fatalf("proposal with an unknown field: %v, want ErrStopped", err)
			}
			n.View(func(m *fsm.Machine) {
				if _, held := m.Lock("x"); held {
					t.Fatal("the entry was applied without its unknown field")
				}
			})
		})
	}
}

// TestLogVersion: a cluster bootstrapped by a release that reads log
// version 1 stays at 1 when its member is upgraded, until SetLogVersion
// raises it; until then what version 2 added is left out (an open's
// nonce) or refused, the command itself never proposed (a hold limit on a
// set; only its seq fence is).
// A member that reads only version 1 stops at the entry that raises it,
// before applying it; upgraded, it applies it and writes version 2.
func TestLogVersion(t *testing.T) {
	ctx := context.Background()
	st := &memStore{}
	net := &memNet{nodes: map[uint64]*Node{}}
	start := func(reads uint32) *Node {
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Store, cfg.Recovered, cfg.Transport = 1, []uint64{1}, st, st.recovered(), net
		cfg.TickInterval = 5 * time.Millisecond
		cfg.LogVersion = reads
		n, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		net.set(1, n)
		waitLeader(t, n)
		if err := n.ReadBarrier(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}
	openWithNonce := func(n *Node) uint64 {
		t.Helper()
		res, _, err := n.Propose(ctx, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{
			OpenSession: &fsmpb.OpenSession{TtlNanos: int64(10 * time.Second), Owner: "w", Nonce: 7}}})
		if err != nil || fsm.ErrorOf(res) != nil {
			t.Fatalf("open session: %v %v", err, res)
		}
		return res.GetSessionId()
	}
	heldSet := func(session, seq uint64) *fsmpb.Command {
		return &fsmpb.Command{SessionId: session, Seq: seq, Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
			Locks: []string{"x", "y"}, HoldLimitNanos: int64(5 * time.Second)}}}
	}
	setVersion := &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: 2}}}

	if v := startLone(t, &memStore{}).LogVersion(); v != 1 {
		t.Fatalf("a new cluster is at log version %d, want 1 until its leader raises it", v)
	}
	old := start(1)
	if v := old.LogVersion(); v != 1 {
		t.Fatalf("a cluster bootstrapped by a release reading version 1 is at %d", v)
	}
	a := openWithNonce(old)
	if b := openWithNonce(old); a == b {
		t.Fatalf("at version 1 an open kept its nonce: the retry answered session %d again", a)
	}
	// The applied index advances before a proposal completes; Status only
	// at the end of the loop's turn.
	applied := func() uint64 {
		var i uint64
		old.View(func(m *fsm.Machine) { i = m.AppliedIndex() })
		return i
	}
	before := applied()
	if _, _, err := old.Propose(ctx, heldSet(a, 1)); !errors.Is(err, ErrLogVersion) || !strings.Contains(err.Error(), "hold limit on a set") {
		t.Fatalf("a hold-limited set at version 1: %v, want ErrLogVersion", err)
	}
	if after := applied(); after != before+1 {
		t.Fatalf("the refusal committed %d entries, want its seq fence alone (fsm.SeqFence)", after-before)
	}
	if _, _, err := old.Propose(ctx, setVersion); !errors.Is(err, ErrStopped) {
		t.Fatalf("raising the version on a member that reads only 1: %v, want ErrStopped", err)
	}
	if err := old.Err(); err == nil || !strings.Contains(err.Error(), "reads up to 1") {
		t.Fatalf("the member stopped with %v", err)
	}
	if v := old.LogVersion(); v != 1 {
		t.Fatalf("the stopped member applied the entry: version %d", v)
	}
	old.Stop()

	up := start(0) // this release: the entry is applied on restart
	defer up.Stop()
	if v := up.LogVersion(); v != 2 {
		t.Fatalf("after the upgrade the cluster is at %d, want 2", v)
	}
	c := openWithNonce(up)
	if d := openWithNonce(up); c != d {
		t.Fatalf("at version 2 a retried open made session %d, not %d again", d, c)
	}
	res, _, err := up.Propose(ctx, heldSet(c, 1))
	if err != nil || fsm.ErrorOf(res) != nil || len(res.GetAcquireMany()) != 2 {
		t.Fatalf("a hold-limited set at version 2: %v %v", err, res)
	}
}
