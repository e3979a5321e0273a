package raftnode

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func waitingAcquire(session, seq uint64, lock string) *fsmpb.Command {
	return &fsmpb.Command{SessionId: session, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, Wait: true}}}
}

func release(session, seq uint64, lock string, token uint64) *fsmpb.Command {
	return &fsmpb.Command{SessionId: session, Seq: seq, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: lock, Token: token}}}
}

// manualLone starts a one-member group in manual mode and ticks it until
// it leads.
func manualLone(t *testing.T) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &queueNet{}
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
		if n.IsLeader() {
			return n
		}
	}
	t.Fatal("a lone member did not lead after 100 ticks")
	return nil
}

// settled submits cmd, drives n until it is idle, and returns the outcome.
func settled(t *testing.T, n *Node, cmd *fsmpb.Command) (*fsmpb.Result, uint64) {
	t.Helper()
	f, err := n.Submit(cmd)
	if err != nil {
		t.Fatal(err)
	}
	runDry(t, n)
	if !done(f) {
		t.Fatalf("%v not applied once the node was idle", cmd)
	}
	res, index, err := f.Wait(context.Background())
	if err != nil || fsm.ErrorOf(res) != nil {
		t.Fatalf("%v: %v %v", cmd, err, res)
	}
	return res, index
}

func done(f *Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// A waiting acquire that would queue behind others is held back until the
// next proposal, and goes into the log just before it, in the same
// batch; with no next proposal, until the next tick. One that would not
// queue is proposed at once.
func TestAcquiresThatWillQueueWaitForTheNextProposal(t *testing.T) {
	n := manualLone(t)
	open := func() uint64 {
		res, _ := settled(t, n, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(time.Minute)}}})
		return res.GetSessionId()
	}
	a, b, c, d := open(), open(), open(), open()
	granted, _ := settled(t, n, waitingAcquire(a, 1, "x"))
	// b queues behind a's hold, but x has no waiter yet: proposed at once.
	if res, _ := settled(t, n, waitingAcquire(b, 1, "x")); res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
		t.Fatalf("b's acquire: %v, want queued", res)
	}
	before := n.Metrics()

	// c would queue behind b: held.
	fc, err := n.Submit(waitingAcquire(c, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	runDry(t, n)
	if done(fc) {
		t.Fatal("c's acquire, which would queue, was proposed alone")
	}
	// a's release comes: c's acquire goes first, in the same batch.
	_, relIndex := settled(t, n, release(a, 2, "x", granted.GetAcquire().GetToken()))
	if !done(fc) {
		t.Fatal("c's held acquire was not proposed with the next proposal")
	}
	res, cIndex, _ := fc.Wait(context.Background())
	if res.GetAcquire().GetStatus() != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED || cIndex != relIndex-1 {
		t.Fatalf("c's acquire: %v at index %d, want queued just before the release at %d", res, cIndex, relIndex)
	}
	if got := n.Metrics().ProposeBatches - before.ProposeBatches; got != 1 {
		t.Fatalf("the held acquire and the release took %d MsgProp batches, want 1", got)
	}
	if got := n.Metrics().Deferred - before.Deferred; got != 1 {
		t.Fatalf("%d proposals deferred, want 1", got)
	}

	// Nothing follows d's acquire: the next tick proposes it.
	fd, err := n.Submit(waitingAcquire(d, 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	runDry(t, n)
	if done(fd) {
		t.Fatal("d's acquire, which would queue, was proposed alone")
	}
	if err := n.Tick(); err != nil {
		t.Fatal(err)
	}
	runDry(t, n)
	if !done(fd) {
		t.Fatal("the tick did not propose the held acquire")
	}
	// A re-entry would not queue: proposed at once.
	before = n.Metrics()
	settled(t, n, waitingAcquire(b, 2, "x")) // b holds x since a's release
	if got := n.Metrics().Deferred - before.Deferred; got != 0 {
		t.Fatalf("a re-entry was deferred")
	}
}

// The held proposals' time runs from the first of them: a deferrable
// proposal held after it does not put the first one off.
func TestHeldProposalsWaitFromTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startLone(t, &memStore{})
		ctx := context.Background()
		var sessions []uint64
		for _, o := range []string{"a", "b", "c", "d"} {
			sessions = append(sessions, open(t, n, o))
		}
		for _, s := range sessions[:2] {
			if _, _, err := n.Propose(ctx, waitingAcquire(s, 1, "x")); err != nil {
				t.Fatal(err)
			}
		}
		before := n.Metrics()
		fc, err := n.Submit(waitingAcquire(sessions[2], 1, "x"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(maxDeferral * 6 / 10)
		fd, err := n.Submit(waitingAcquire(sessions[3], 1, "x"))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if done(fc) || done(fd) {
			t.Fatal("held proposals were proposed before their time")
		}
		time.Sleep(maxDeferral*4/10 + time.Microsecond)
		synctest.Wait()
		if !done(fc) || !done(fd) {
			t.Fatalf("%v after the first held proposal, it is done: %v, and the second: %v; want both", maxDeferral, done(fc), done(fd))
		}
		if got := n.Metrics().Deferred - before.Deferred; got != 2 {
			t.Fatalf("%d proposals deferred, want 2", got)
		}
	})
}

// A leader that steps down fails the proposals it held and never proposes
// them.
func TestSteppingDownDropsHeldProposals(t *testing.T) {
	peers := []uint64{1, 2, 3}
	net := &queueNet{}
	nodes := startManualNodes(t, peers, net)
	lead := electManual(t, nodes, peers, net)
	submit := func(cmd *fsmpb.Command) *fsmpb.Result {
		f, err := lead.Submit(cmd)
		if err != nil {
			t.Fatal(err)
		}
		settleManual(t, nodes, peers, net)
		res, _, err := f.Wait(context.Background())
		if err != nil || fsm.ErrorOf(res) != nil {
			t.Fatalf("%v: %v %v", cmd, err, res)
		}
		return res
	}
	var sessions []uint64
	for range 3 {
		sessions = append(sessions, submit(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(time.Minute)}}}).GetSessionId())
	}
	submit(waitingAcquire(sessions[0], 1, "x"))
	submit(waitingAcquire(sessions[1], 1, "x"))
	f, err := lead.Submit(waitingAcquire(sessions[2], 1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	settleManual(t, nodes, peers, net)
	if done(f) {
		t.Fatal("the acquire that would queue was not held")
	}
	for _, id := range peers {
		if nodes[id] != lead {
			lead.rn.TransferLeader(id)
			break
		}
	}
	settleManual(t, nodes, peers, net) // no tick: the held proposal stays held until the step-down
	if lead.IsLeader() {
		t.Fatal("the leader did not step down")
	}
	if !done(f) {
		t.Fatal("the held proposal was not failed when its leader stepped down")
	}
	if _, _, err := f.Wait(context.Background()); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("held proposal: %v, want ErrOutcomeUnknown", err)
	}
	for range 3 {
		for _, id := range peers {
			_ = nodes[id].Tick()
		}
		settleManual(t, nodes, peers, net)
	}
	for _, id := range peers {
		nodes[id].View(func(m *fsm.Machine) {
			if l, _ := m.Lock("x"); len(l.GetWaiters()) != 1 {
				t.Fatalf("member %d: lock x %v, want only the second session waiting", id, l)
			}
		})
	}
}
