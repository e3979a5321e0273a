package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Backups taken while workers acquire and release: each is at least at
// the index applied when it was asked for, its data is the state at its
// index byte for byte (a replay of the log says so), its term is its
// entry's, and it names the group's voters, cluster id and log version. Snapshots are
// otherwise rare here (every 100,000 entries), so each backup is a
// snapshot of its own.
func TestBackupIsTheStateAtItsIndex(t *testing.T) {
	st := &logStore{all: map[uint64]*raftpb.Entry{}}
	n := startSnapshotting(t, st, 100_000)
	defer n.Stop()
	waitLeader(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		s := open(t, n, fmt.Sprintf("w%d", w))
		wg.Go(func() {
			for seq := uint64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("load/%d/%d", w, seq%5)
				if _, _, err := n.Propose(ctx, acquire(s, seq, name)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var backups []Backup
	for range 3 {
		asked := n.Status().Applied
		b, err := n.Backup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.Index < asked {
			t.Fatalf("backup at %d, asked for when %d was applied", b.Index, asked)
		}
		backups = append(backups, b)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n.Stop()

	st.mu.Lock()
	defer st.mu.Unlock()
	replay := fsm.New()
	for _, b := range backups {
		if !slices.Equal(b.Voters, []uint64{1}) || len(b.Learners) != 0 {
			t.Errorf("backup at %d: voters %v learners %v, want [1] and none", b.Index, b.Voters, b.Learners)
		}
		if e := st.all[b.Index]; e == nil || e.GetTerm() != b.Term {
			t.Errorf("backup at %d: term %d, not its entry's (%v)", b.Index, b.Term, e)
		}
		for i := replay.AppliedIndex() + 1; i <= b.Index; i++ {
			e := st.all[i]
			if e == nil {
				t.Fatalf("entry %d was never saved", i)
			}
			switch {
			case e.GetType() == raftpb.EntryConfChange:
				cc := &raftpb.ConfChange{}
				if err := proto.Unmarshal(e.GetData(), cc); err != nil {
					t.Fatal(err)
				}
				ApplyMembership(replay, i, cc)
			case e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0:
				replay.SetApplied(i)
			default:
				cmd := &fsmpb.Command{}
				if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
					t.Fatal(err)
				}
				replay.Apply(i, cmd)
			}
		}
		want, _ := replay.Snapshot()
		if !bytes.Equal(b.Data, want) {
			t.Fatalf("backup at %d (%d bytes) is not the state at %d (%d bytes)", b.Index, len(b.Data), b.Index, len(want))
		}
		if b.ClusterID != replay.ClusterID() || b.LogVersion != replay.LogVersion() {
			t.Errorf("backup at %d: cluster id %x, log version %d; want %x, %d", b.Index, b.ClusterID, b.LogVersion, replay.ClusterID(), replay.LogVersion())
		}
	}
	if backups[2].Index <= backups[0].Index {
		t.Errorf("backups at %d, %d, %d under load: the state did not move", backups[0].Index, backups[1].Index, backups[2].Index)
	}
}

// A backup asked of a stopped node fails with ErrStopped.
func TestBackupOfAStoppedNode(t *testing.T) {
	n := startLone(t, &memStore{})
	n.Stop()
	if _, err := n.Backup(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("backup of a stopped node: %v, want ErrStopped", err)
	}
}

// A backup asked while the node's own snapshot is being saved waits for
// that save, then takes its own, even when nothing else happens on the
// node afterwards (a lone member with no peers and no clients gets no
// Ready to take it in).
func TestBackupAfterABusySnapshotOnAnIdleNode(t *testing.T) {
	st := &snapGatedStore{gate: make(chan struct{}), blocked: make(chan struct{})}
	n := startSnapshotting(t, st, 10)
	defer n.Stop()
	gateOpen := false
	defer func() {
		if !gateOpen {
			close(st.gate)
		}
	}()
	waitLeader(t, n)
	s := open(t, n, "a")
	// Twice the snapshot interval: the node takes a snapshot on the way,
	// whose save then waits at the gate.
	var last uint64
	for i := 1; i <= 20; i++ {
		_, index, err := n.Propose(context.Background(), acquire(s, uint64(i), fmt.Sprintf("k%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = index
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-st.blocked:
	case <-ctx.Done():
		t.Fatal("no snapshot save began after 20 entries, with a snapshot every 10")
	}
	done := make(chan backupResult, 1)
	go func() {
		b, err := n.Backup(ctx)
		done <- backupResult{b, err}
	}()
	close(st.gate)
	gateOpen = true
	r := <-done
	if r.err != nil {
		t.Fatalf("backup after the busy snapshot: %v", r.err)
	}
	if r.b.Index < last {
		t.Fatalf("backup at %d, before the last command applied (%d)", r.b.Index, last)
	}
}
