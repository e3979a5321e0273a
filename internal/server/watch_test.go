package server

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// watchedMachine applies commands as the Ready loop does: each one to the
// machine, then to the watches' inspect, with flush at the end of a batch.
type watchedMachine struct {
	*machine
	ws *watches
}

func newWatchedMachine(t *testing.T) *watchedMachine {
	wm := &watchedMachine{machine: newMachine(t, 1), ws: newWatches()}
	wm.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: fsm.LogVersion}}})
	return wm
}

// batch applies cmds as one batch and returns their results.
func (wm *watchedMachine) batch(cmds ...*fsmpb.Command) []*fsmpb.Result {
	var out []*fsmpb.Result
	for _, cmd := range cmds {
		wm.index++
		cmd.WallTimeUnixNano = wm.wall
		res := wm.m.Apply(wm.index, cmd)
		wm.ws.inspect(wm.index, cmd, res, wm.m)
		out = append(out, res)
	}
	wm.ws.flush()
	return out
}

// watch registers a watcher of name and seeds its lock's state, as
// Server.watch does.
func (wm *watchedMachine) watch(name string) *watcher {
	w := &watcher{name: name, wake: make(chan struct{}, 1)}
	if err := wm.ws.add(w); err != nil {
		wm.t.Fatal(err)
	}
	wm.ws.seed(name, lockState(wm.m, name))
	return w
}

func campaignCmd(s, seq uint64, lock, value string) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock, Wait: true, Value: value}}}
}

func proclaimCmd(s, seq uint64, lock string, token uint64, value string) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Proclaim{Proclaim: &fsmpb.Proclaim{Lock: lock, Token: token, Value: value}}}
}

// leaderOf describes a watched election's state: "token=value", or "-"
// for none.
func leaderOf(r *batonpb.WatchResponse) string {
	hs := r.GetLock().GetHolders()
	if len(hs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d=%s", hs[0].GetToken(), hs[0].GetValue())
}

// TestWatchesQueueEveryEntryOfABatch: the states a watcher gets are one
// per entry that changed its lock, each as of its entry, in log order,
// although the whole batch is flushed at once; a session's end reaches
// the locks it held; entries that change nothing watched queue nothing.
func TestWatchesQueueEveryEntryOfABatch(t *testing.T) {
	wm := newWatchedMachine(t)
	a, b := wm.open(), wm.open()
	w := wm.watch("e")
	other := wm.watch("other")

	grantA := wm.index + 1
	res := wm.batch(
		campaignCmd(a, 1, "e", "a1"),
		proclaimCmd(a, 2, "e", grantA, "a2"),
		proclaimCmd(a, 3, "e", grantA, "a3"),
		campaignCmd(b, 1, "e", "b1"), // queues behind a
		acquireCmd(b, 2, "elsewhere"),
		releaseCmd(a, 4, "e", grantA), // b leads, with the release's index as token
		&fsmpb.Command{SessionId: b, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}},
	)
	for i, r := range res {
		if r.GetError() != fsmpb.Error_ERROR_NONE {
			t.Fatalf("command %d refused: %v", i, r)
		}
	}
	got, lagged := w.take()
	if lagged {
		t.Fatal("lagged after 7 entries")
	}
	grantB := grantA + 5
	want := []string{
		fmt.Sprintf("%d=a1", grantA), fmt.Sprintf("%d=a2", grantA), fmt.Sprintf("%d=a3", grantA),
		fmt.Sprintf("%d=a3", grantA), // b's wait queued: same leader, one more waiter
		fmt.Sprintf("%d=b1", grantB), "-",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d states, want %d: %v", len(got), len(want), got)
	}
	for i, r := range got {
		if leaderOf(r) != want[i] {
			t.Errorf("state %d: %s, want %s", i, leaderOf(r), want[i])
		}
		if i > 0 && r.GetIndex() <= got[i-1].GetIndex() {
			t.Errorf("state %d at index %d, after %d", i, r.GetIndex(), got[i-1].GetIndex())
		}
	}
	if n := len(got[3].GetLock().GetWaiters()); n != 1 {
		t.Errorf("state 3 has %d waiters, want b", n)
	}
	if q, _ := other.take(); len(q) != 0 {
		t.Errorf("a lock nobody touched got %d states", len(q))
	}
}

// TestWatchesLagAndCatchUp: a watcher with more than MaxWatchBacklog
// unsent states loses them and is marked lagged; catching up from the
// last state it sent gives the lock now and the holds that ended since,
// oldest first, from the replicated history, with their last values; a
// snapshot makes every watcher catch up.
func TestWatchesLagAndCatchUp(t *testing.T) {
	wm := newWatchedMachine(t)
	a, b := wm.open(), wm.open()
	w := wm.watch("e")
	sentIndex := wm.index

	tokenA := wm.index + 1
	wm.batch(campaignCmd(a, 1, "e", "a0"), campaignCmd(b, 1, "e", "b0"))
	for i := range MaxWatchBacklog {
		wm.batch(proclaimCmd(a, uint64(i+2), "e", tokenA, fmt.Sprintf("a%d", i+1)))
	}
	wm.batch(releaseCmd(a, MaxWatchBacklog+2, "e", tokenA))
	tokenB := wm.index
	wm.batch(releaseCmd(b, 2, "e", tokenB))
	if q, lagged := w.take(); !lagged || q != nil {
		t.Fatalf("after %d states: lagged %v with %d queued, want lagged and none", MaxWatchBacklog+4, lagged, len(q))
	}

	r := catchUp(wm.m, "e", sentIndex)
	if !r.GetGap() || !r.GetMissedAll() || r.GetLock() != nil || r.GetIndex() != wm.index {
		t.Fatalf("catch-up: gap %v missed_all %v lock %v index %d (want %d)", r.GetGap(), r.GetMissedAll(), r.GetLock(), r.GetIndex(), wm.index)
	}
	ms := r.GetMissed()
	if len(ms) != 2 || ms[0].GetToken() != tokenA || ms[0].GetValue() != fmt.Sprintf("a%d", MaxWatchBacklog) ||
		ms[1].GetToken() != tokenB || ms[1].GetValue() != "b0" || ms[1].GetEndedIndex() != wm.index {
		t.Fatalf("missed %v, want a's hold (last value a%d) then b's", ms, MaxWatchBacklog)
	}
	if r := catchUp(wm.m, "e", tokenB); len(r.GetMissed()) != 1 || !r.GetMissedAll() {
		t.Fatalf("catch-up from b's grant: %v", r)
	}
	if r := catchUp(wm.m, "e", 0); r.GetGap() || len(r.GetMissed()) != 0 {
		t.Fatalf("a first state is no gap: %v", r)
	}

	// After a snapshot anything may have changed: every watcher lags.
	wm.batch(campaignCmd(a, MaxWatchBacklog+3, "e", "again"))
	if q, lagged := w.take(); lagged || len(q) != 1 {
		t.Fatalf("after one more change: %d queued, lagged %v", len(q), lagged)
	}
	wm.ws.restored()
	wm.ws.flush()
	if _, lagged := w.take(); !lagged {
		t.Fatal("a watcher did not catch up after a snapshot")
	}
}

// TestWatchesBoundTheirMemory: the bytes queued for every watcher are
// counted, given back when a watcher sends, lags or goes, and a state that
// would pass the member's budget makes its watcher catch up instead.
func TestWatchesBoundTheirMemory(t *testing.T) {
	wm := newWatchedMachine(t)
	a := wm.open()
	w1, w2 := wm.watch("e"), wm.watch("e")
	token := wm.index + 1
	wm.batch(campaignCmd(a, 1, "e", "v0"), proclaimCmd(a, 2, "e", token, "v1"))
	q1, _ := w1.take()
	var one int64
	for _, r := range q1 {
		one += int64(proto.Size(r))
	}
	if got := wm.ws.queued.Load(); len(q1) != 2 || got != one {
		t.Fatalf("queued %d bytes after w1 took %d states of %d bytes; want w2's %d", got, len(q1), one, one)
	}
	wm.ws.remove(w2)
	if got := wm.ws.queued.Load(); got != 0 {
		t.Fatalf("queued %d bytes once w2 went, want 0", got)
	}

	defer func(old int64) { watchQueueBytes = old }(watchQueueBytes)
	watchQueueBytes = one // room for two states, not three
	for i := range 3 {
		wm.batch(proclaimCmd(a, uint64(3+i), "e", token, fmt.Sprintf("w%d", i)))
	}
	if q, lagged := w1.take(); !lagged || q != nil {
		t.Fatalf("past the budget: lagged %v with %d queued, want lagged and none", lagged, len(q))
	}
	if got := wm.ws.queued.Load(); got != 0 {
		t.Fatalf("queued %d bytes after the lag, want 0", got)
	}
}
