package server

import (
	"fmt"
	"testing"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Benchmarks of what the server's observers of each applied entry
// (Deliver, Inspect) add to the Ready loop for one entry at fleet scale.

// fleetResult is the result of a writer's release that lets in n readers,
// each of whose holds has a hold limit (so each is in
// liveness.limited_holds_granted too).
func fleetResult(n int) *fsmpb.Result {
	res := &fsmpb.Result{Liveness: &fsmpb.Liveness{}}
	for i := range n {
		g := &fsmpb.Grant{SessionId: uint64(100 + i), AcquireSeq: 1, Lock: "jobs/x", Token: 99, Shared: true}
		res.Grants = append(res.Grants, g)
		res.Liveness.LimitedHoldsGranted = append(res.Liveness.LimitedHoldsGranted, &fsmpb.LimitedHold{
			SessionId: g.SessionId, Lock: g.Lock, Token: g.Token, HoldLimitNanos: int64(rules.DefaultTTL)})
	}
	return res
}

// BenchmarkPublishGrants is the hub's routing of an entry with n grants
// (a run of readers let in), with signed grants on: each grant's mode.
func BenchmarkPublishGrants(b *testing.B) {
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("grants=%d", n), func(b *testing.B) {
			res := fleetResult(n)
			h := newHub()
			h.signs = true
			b.ReportAllocs()
			for b.Loop() {
				h.publish(res)
			}
		})
	}
}

// BenchmarkLockMetricsGrants is lock metrics' count of an entry with n
// grants: each hold noted for its session.
func BenchmarkLockMetricsGrants(b *testing.B) {
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("grants=%d", n), func(b *testing.B) {
			res := fleetResult(n)
			cmd := releaseCmd(1, 2, "jobs/x", 98)
			index := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				lm := newLockMetrics(1, func(f func(*fsm.Machine)) {})
				lm.flushed()
				b.StartTimer()
				index++
				lm.applied(index, cmd, res)
			}
		})
	}
}

// BenchmarkWatchInspect is Inspect after an entry that changes n watched
// locks: the expiry of a session waiting for n locks (waits=n), each
// watched; (others=n) the expiry of a session that holds none of n
// watched locks; and (queue=n) an acquire queued on a watched lock with
// n waiters, whose state is read whole.
func BenchmarkWatchInspect(b *testing.B) {
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) {
			wm, apply, open := newInspectBench(b)
			t, s := open(), open()
			for i := range n {
				name := fmt.Sprintf("jobs/%d", i)
				apply(&fsmpb.Command{SessionId: t, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
				apply(&fsmpb.Command{SessionId: s, Seq: uint64(i + 1), MinUnackedSeq: uint64(i + 1), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name, Wait: true}}})
				w := &watcher{name: name, wake: make(chan struct{}, 1)}
				if err := wm.ws.add(w); err != nil {
					b.Fatal(err)
				}
			}
			cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: s}}}
			res := apply(cmd)
			b.ReportAllocs()
			for b.Loop() {
				// The states read are the last recorded from the second
				// time on: nothing is queued, the reads are.
				wm.ws.inspect(wm.index, cmd, res, wm.m)
			}
		})
	}
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("others=%d", n), func(b *testing.B) {
			wm, apply, open := newInspectBench(b)
			for i := range n {
				name := fmt.Sprintf("jobs/%d", i)
				apply(&fsmpb.Command{SessionId: open(), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name}}})
				w := &watcher{name: name, wake: make(chan struct{}, 1)}
				if err := wm.ws.add(w); err != nil {
					b.Fatal(err)
				}
				wm.ws.seed(name, lockState(wm.m, name))
			}
			s := open()
			apply(&fsmpb.Command{SessionId: s, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "unwatched"}}})
			cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: s}}}
			res := apply(cmd)
			b.ReportAllocs()
			for b.Loop() {
				wm.ws.inspect(wm.index, cmd, res, wm.m)
			}
		})
	}
	for _, n := range []int{16, 256, 1024, 10000} {
		b.Run(fmt.Sprintf("queue=%d", n), func(b *testing.B) {
			wm, apply, open := newInspectBench(b)
			var res *fsmpb.Result
			var cmd *fsmpb.Command
			for i := range n + 1 {
				cmd = &fsmpb.Command{SessionId: open(), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "jobs/x", Wait: i > 0}}}
				if i > 0 {
					cmd.Seq, cmd.MinUnackedSeq = 1, 1
				}
				res = apply(cmd)
			}
			w := &watcher{name: "jobs/x", wake: make(chan struct{}, 1)}
			if err := wm.ws.add(w); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				wm.ws.inspect(wm.index, cmd, res, wm.m)
			}
		})
	}
}

// newInspectBench is a state machine for BenchmarkWatchInspect with its
// watches, and apply and open, which fail the benchmark on a refusal.
func newInspectBench(b *testing.B) (*watchedMachine, func(*fsmpb.Command) *fsmpb.Result, func() uint64) {
	wm := &watchedMachine{machine: &machine{m: fsm.New()}, ws: newWatches()}
	apply := func(c *fsmpb.Command) *fsmpb.Result {
		wm.index++
		res := wm.m.Apply(wm.index, c)
		if err := fsm.ErrorOf(res); err != nil {
			b.Fatal(err)
		}
		return res
	}
	open := func() uint64 {
		return apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{TtlNanos: int64(rules.DefaultTTL)}}}).GetSessionId()
	}
	return wm, apply, open
}

// TestGrantModesIn: the index of many limited holds gives each grant the
// mode grantModeIn's scan gives it, the last of equal holds counting.
func TestGrantModesIn(t *testing.T) {
	for _, n := range []int{3, 100} {
		res := fleetResult(n)
		lh := res.Liveness.LimitedHoldsGranted
		lh[1].HoldLimitNanos = 7
		lh = append(lh, &fsmpb.LimitedHold{SessionId: lh[0].SessionId, Lock: lh[0].Lock, Token: lh[0].Token, HoldLimitNanos: 5})
		res.Liveness.LimitedHoldsGranted = lh // the first grant's hold twice: 5 counts
		res.Grants = append(res.Grants, &fsmpb.Grant{SessionId: 1, Lock: "jobs/y", Token: 3})
		modeIn := grantModesIn(res)
		for _, g := range res.Grants {
			if got, want := modeIn(g), grantModeIn(res, g); got != want {
				t.Errorf("%d holds: grant %v: mode %+v, want %+v", n, g, got, want)
			}
		}
	}
}

// TestWatchManyLocksOneEntry: an entry that changes more watched locks
// than inspect scans for duplicates (the expiry of a session waiting for
// 40, each also in its waits_ended twice over) offers each watcher its
// lock's new state once.
func TestWatchManyLocksOneEntry(t *testing.T) {
	wm := newWatchedMachine(t)
	holder, s := wm.open(), wm.open()
	var ws []*watcher
	for i := range 40 {
		name := fmt.Sprintf("jobs/%d", i)
		wm.batch(acquireCmd(holder, uint64(i+1), name))
		for k := range 2 {
			wm.batch(&fsmpb.Command{SessionId: s, Seq: uint64(2*i + k + 1), Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
				Lock: name, OwnerKey: fmt.Sprint(k), Wait: true}}})
		}
		ws = append(ws, wm.watch(name))
	}
	res := wm.batch(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: s}}})
	if n := len(res[0].GetWaitsEnded()); n != 80 {
		t.Fatalf("%d waits ended, want 80", n)
	}
	for _, w := range ws {
		q, lagged := w.take()
		if len(q) != 1 || lagged || len(q[0].GetLock().GetWaiters()) != 0 {
			t.Fatalf("watcher of %s: %d states (lagged %v), want 1 without waiters: %v", w.name, len(q), lagged, q)
		}
	}
}
