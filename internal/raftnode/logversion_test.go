package raftnode

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestNewLeaderDecidesNoVersionBeforeCatchingUp: a new leader may not have
// applied the entry that raised the cluster's log version (its
// predecessor committed it and crashed before telling anyone); until it
// has applied an entry of its own term, a command the old version cannot
// carry is sent back to retry (NotLeaderError naming itself), never
// refused for good or stripped: an earlier attempt of the same request
// may have applied after that entry.
func TestNewLeaderDecidesNoVersionBeforeCatchingUp(t *testing.T) {
	peers := []uint64{1, 2, 3}
	net := &queueNet{}
	stores := map[uint64]*memStore{1: {}, 2: {}, 3: {}}
	nodes := map[uint64]*Node{}
	start := func(id uint64, reads uint32) {
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = id, peers, stores[id], net
		cfg.Recovered = stores[id].recovered()
		cfg.LogVersion = reads
		cfg.ProposalIDBase = id << 32
		n, err := StartManual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
	}
	// deliver hands the queued messages that pass keep to their nodes and
	// drops the others; it reports whether any was delivered.
	deliver := func(keep func(*raftpb.Message) bool) bool {
		msgs := net.msgs
		net.msgs = nil
		any := false
		for _, m := range msgs {
			if keep(m) {
				nodes[m.GetTo()].Step(m)
				any = true
			}
		}
		return any
	}
	among := func(ids ...uint64) func(*raftpb.Message) bool {
		return func(m *raftpb.Message) bool {
			return slices.Contains(ids, m.GetFrom()) && slices.Contains(ids, m.GetTo())
		}
	}
	settle := func(ids ...uint64) {
		for busy := true; busy; {
			busy = false
			for _, id := range ids {
				busy = runDry(t, nodes[id]) || busy
			}
			busy = deliver(among(ids...)) || busy
		}
	}
	elect := func(ids ...uint64) *Node {
		for range 200 {
			for _, id := range ids {
				if err := nodes[id].Tick(); err != nil {
					t.Fatal(err)
				}
			}
			settle(ids...)
			for _, id := range ids {
				if nodes[id].IsLeader() {
					return nodes[id]
				}
			}
		}
		t.Fatal("no leader")
		return nil
	}
	// A cluster of a release that reads version 1, upgraded.
	for _, id := range peers {
		start(id, 1)
	}
	elect(peers...)
	for _, id := range peers {
		nodes[id].Stop()
		start(id, 0)
	}
	a := elect(peers...)
	var others []uint64
	for _, id := range peers {
		if nodes[id] != a {
			others = append(others, id)
		}
	}
	// a commits and applies SetLogVersion 2; the others log it but never
	// hear that it committed: a crashes first.
	if _, err := a.Submit(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: 2}}}); err != nil {
		t.Fatal(err)
	}
	runDry(t, a)
	deliver(func(*raftpb.Message) bool { return true }) // the appends
	for _, id := range others {
		runDry(t, nodes[id])
	}
	deliver(func(*raftpb.Message) bool { return true }) // the acknowledgements
	runDry(t, a)
	net.msgs = nil // a's news of the commit is lost with it
	if a.LogVersion() != 2 {
		t.Fatalf("the old leader applied version %d", a.LogVersion())
	}
	// A new leader among the others, elected with votes only: it has not
	// committed, or applied, anything of its term.
	isVote := func(m *raftpb.Message) bool {
		switch m.GetType() {
		case raftpb.MsgVote, raftpb.MsgVoteResp, raftpb.MsgPreVote, raftpb.MsgPreVoteResp:
			return among(others...)(m)
		}
		return false
	}
	var b *Node
	for i := 0; b == nil && i < 200; i++ {
		for _, id := range others {
			if err := nodes[id].Tick(); err != nil {
				t.Fatal(err)
			}
			runDry(t, nodes[id])
		}
		for deliver(isVote) {
			for _, id := range others {
				runDry(t, nodes[id])
			}
		}
		for _, id := range others {
			if nodes[id].IsLeader() {
				b = nodes[id]
			}
		}
	}
	if b == nil {
		t.Fatal("no new leader")
	}
	net.msgs = nil
	if b.LogVersion() != 1 {
		t.Fatalf("the new leader is at version %d before it caught up", b.LogVersion())
	}
	heldSet := &fsmpb.Command{SessionId: 1, Seq: 1, Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
		Locks: []string{"x"}, HoldLimitNanos: int64(5 * time.Second)}}}
	var nl *NotLeaderError
	if _, err := b.Submit(proto.Clone(heldSet).(*fsmpb.Command)); !errors.As(err, &nl) || nl.Leader != b.cfg.ID {
		t.Fatalf("a new leader that has not caught up answered %v; want a NotLeaderError naming itself (retry)", err)
	}
	open := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(10 * time.Second), Nonce: 9}}}
	if _, err := b.Submit(open); !errors.As(err, &nl) || open.GetOpenSession().GetNonce() != 9 {
		t.Fatalf("an open at a new leader that has not caught up: %v, nonce %d; want a retry, nonce kept", err, open.GetOpenSession().GetNonce())
	}
	for range 5 { // heartbeats: b's append of its term was dropped
		for _, id := range others {
			if err := nodes[id].Tick(); err != nil {
				t.Fatal(err)
			}
		}
		settle(others...)
	}
	if b.LogVersion() != 2 {
		t.Fatalf("after catching up the new leader is at version %d", b.LogVersion())
	}
	if _, err := b.Submit(heldSet); err != nil {
		t.Fatalf("after catching up: %v", err)
	}
}

// TestNewLeaderWaitsForSilentMembersVersions: while a member has not said
// which log version it reads, a new leader asks the caller to retry a
// command that needs a newer version than the cluster's (an open with a
// secret's hash), for two election timeouts of its lead; then it writes
// the command stripped to what the cluster reads, as for a member known
// to be older.
func TestNewLeaderWaitsForSilentMembersVersions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &queueNet{}
	cfg.Recovered = cfg.Store.(*memStore).recovered()
	cfg.LogVersionDue = func(Membership) (uint32, bool) { return 0, false } // someone is silent
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for i := 0; !n.IsLeader() || !n.caughtUp.Load(); i++ {
		if i > 200 {
			t.Fatal("no leader")
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
	}
	open := func() (*fsmpb.Command, error) {
		cmd := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
			TtlNanos: int64(10 * time.Second), SecretHash: make([]byte, 32)}}}
		cmd.GetOpenSession().SecretHash[0] = 1
		_, err := n.Submit(cmd)
		return cmd, err
	}
	var nl *NotLeaderError
	if _, err := open(); !errors.As(err, &nl) {
		t.Fatalf("an open as the lead begins, a member silent: %v; want a retry", err)
	}
	for n.ledTicks.Load() < int64(versionGraceElections*cfg.ElectionTicks) {
		if cmd, err := open(); !errors.As(err, &nl) || nl.Leader != cfg.ID || len(cmd.GetOpenSession().GetSecretHash()) == 0 {
			t.Fatalf("an open %d ticks into the lead, a member silent: %v (hash kept: %v); want a retry naming the leader",
				n.ledTicks.Load(), err, len(cmd.GetOpenSession().GetSecretHash()) > 0)
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
	}
	cmd, err := open()
	if err != nil || len(cmd.GetOpenSession().GetSecretHash()) != 0 {
		t.Fatalf("an open after the grace: %v, hash %x; want it written for version %d, without the hash", err, cmd.GetOpenSession().GetSecretHash(), n.LogVersion())
	}
}
