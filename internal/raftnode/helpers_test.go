package raftnode

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// memStore is an in-memory LogStore that remembers what was persisted, so
// a "restarted" node can be given exactly what a crash would have left.
type memStore struct {
	mu   sync.Mutex
	hs   *raftpb.HardState
	ents []*raftpb.Entry
	snap *raftpb.Snapshot
}

func (s *memStore) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs != nil {
		s.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		kept := s.ents[:0:0]
		for _, e := range s.ents {
			if e.GetIndex() < first {
				kept = append(kept, e)
			}
		}
		for _, e := range ents {
			kept = append(kept, proto.Clone(e).(*raftpb.Entry))
		}
		s.ents = kept
	}
	return nil
}

func (s *memStore) SaveSnapshot(snap *raftpb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap = proto.Clone(snap).(*raftpb.Snapshot)
	idx := snap.GetMetadata().GetIndex()
	kept := s.ents[:0:0]
	for _, e := range s.ents {
		if e.GetIndex() > idx {
			kept = append(kept, e)
		}
	}
	s.ents = kept
	return nil
}

func (s *memStore) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return proto.Clone(s.snap).(*raftpb.Snapshot), nil
}

func (s *memStore) recovered() Recovered {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Recovered{Snapshot: s.snap, HardState: s.hs, Entries: append([]*raftpb.Entry(nil), s.ents...)}
}

// memNet delivers messages between in-process nodes.
type memNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Node
}

func (n *memNet) Send(_ uint64, msgs []*raftpb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if to := n.nodes[m.GetTo()]; to != nil {
			to.Step(proto.Clone(m).(*raftpb.Message))
		}
	}
}

func (n *memNet) set(id uint64, node *Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[id] = node
}

func startNode(t testing.TB, id uint64, peers []uint64, st *memStore, net *memNet) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.Peers = peers
	cfg.Store = st
	cfg.Recovered = st.recovered()
	cfg.Transport = net
	cfg.TickInterval = 5 * time.Millisecond
	cfg.SnapshotEntries = 20
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	net.set(id, n)
	return n
}

// startLone starts a one-member group on st, stopped when the test ends,
// and waits until it leads.
func startLone(t testing.TB, st LogStore) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, st, &memNet{nodes: map[uint64]*Node{}}
	cfg.TickInterval = 5 * time.Millisecond
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	waitLeader(t, n)
	return n
}

func waitLeader(t testing.TB, nodes ...*Node) *Node {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for _, n := range nodes {
			if n != nil && n.IsLeader() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := n.ReadBarrier(ctx)
				cancel()
				if err == nil {
					return n
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no leader")
	return nil
}

func open(t testing.TB, n *Node, owner string) uint64 {
	t.Helper()
	res, _, err := n.Propose(context.Background(), &fsmpb.Command{Op: &fsmpb.Command_OpenSession{
		OpenSession: &fsmpb.OpenSession{TtlNanos: int64(10 * time.Second), Owner: owner}}})
	if err != nil || fsm.ErrorOf(res) != nil {
		t.Fatalf("open session: %v %v", err, res)
	}
	return res.GetSessionId()
}

func acquire(session, seq uint64, lock string) *fsmpb.Command {
	return &fsmpb.Command{SessionId: session, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock}}}
}
