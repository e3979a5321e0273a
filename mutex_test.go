package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

func TestTryLockBusyThenFree(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a := newSession(t, cl, WithOwner("test/a"))
	b := newSession(t, cl, WithOwner("test/b"))

	la, err := a.Mutex("jobs/1").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if la.Token() == 0 || !la.Valid() || la.Remaining() <= 0 {
		t.Fatalf("lease: token %d valid %v remaining %v", la.Token(), la.Valid(), la.Remaining())
	}
	_, err = b.Mutex("jobs/1").TryLock(ctx)
	var busy *BusyError
	if !errors.Is(err, ErrLockBusy) || !errors.As(err, &busy) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLockBusy", err)
	}
	if busy.Holder.SessionID != a.ID() || busy.Holder.Token != la.Token() || busy.Holder.Owner != "test/a" {
		t.Fatalf("busy holder %+v, want session %d token %d", busy.Holder, a.ID(), la.Token())
	}
	// Taken before the release (the Lease makes them on first use), they
	// end with it, as do those first taken after it (below).
	ctxBefore, lostBefore := la.Context(), la.Lost()
	if ctxBefore.Err() != nil {
		t.Fatalf("held lease context: %v", ctxBefore.Err())
	}
	if err := a.Mutex("jobs/1").Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctxBefore), ErrReleased) || la.Context() != ctxBefore {
		t.Fatalf("released lease context taken before: cause %v", context.Cause(ctxBefore))
	}
	select {
	case <-lostBefore:
	default:
		t.Fatal("released lease: Lost taken before not closed")
	}
	if !errors.Is(la.Err(), ErrReleased) {
		t.Fatalf("released lease Err %v", la.Err())
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("released lease: Lost not closed")
	}
	if la.Context().Err() == nil || !errors.Is(context.Cause(la.Context()), ErrReleased) {
		t.Fatalf("released lease context: %v / %v", la.Context().Err(), context.Cause(la.Context()))
	}
	if err := a.Mutex("jobs/1").Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release of a released lease: %v, want nil", err)
	}
	lb, err := b.Mutex("jobs/1").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token of the next holder %d, want > %d", lb.Token(), la.Token())
	}
}

func TestLockWaitsFIFOAndTokensIncrease(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	holder := newSession(t, cl)
	first, err := holder.Mutex("q").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	sessions := make([]*Session, n)
	results := make([]<-chan lockResult, n)
	for i := range n {
		sessions[i] = newSession(t, cl, WithOwner(fmt.Sprintf("w%d", i)))
		results[i] = lockAsync(ctx, sessions[i].Mutex("q"))
		embedtest.WaitFor(t, 5*time.Second, "waiter to queue", func() bool { return len(waiters(t, cl, "q")) == i+1 })
	}
	var want []uint64
	for _, s := range sessions {
		want = append(want, s.ID())
	}
	if got := waiters(t, cl, "q"); !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	// Each release wakes exactly the head of the queue, with a larger
	// token than every earlier holder's.
	prev := first
	for i := range n {
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := recv(t, results[i])
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		if r.lease.Token() <= prev.Token() {
			t.Fatalf("waiter %d token %d, want > %d", i, r.lease.Token(), prev.Token())
		}
		for j := i + 1; j < n; j++ {
			select {
			case r := <-results[j]:
				t.Fatalf("waiter %d returned out of order: %+v", j, r)
			default:
			}
		}
		prev = r.lease
	}
	if err := prev.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockWithinTimesOut: a LockWithin on a held lock gives up at its
// timeout, on synctest's clock exactly then, and leaves the queue.
func TestLockWithinTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		a, b := newSession(t, cl), newSession(t, cl)
		if _, err := a.Mutex("x").Lock(ctx); err != nil {
			t.Fatal(err)
		}
		const timeout = 300 * time.Millisecond
		start := time.Now()
		_, err := b.Mutex("x").LockWithin(ctx, timeout)
		if !errors.Is(err, ErrWaitTimedOut) {
			t.Fatalf("LockWithin: %v, want ErrWaitTimedOut", err)
		}
		if d := time.Since(start); d != timeout {
			t.Fatalf("LockWithin gave up after %v, want at its timeout, %v", d, timeout)
		}
		if w := waiters(t, cl, "x"); len(w) != 0 {
			t.Fatalf("waiters after timeout %v", w)
		}
		// A LockWithin on a free lock is granted at once.
		if _, err := b.Mutex("y").LockWithin(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Mutex("y").LockWithin(ctx, 0); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("LockWithin(0): %v", err)
		}
	})
}

func TestLockCancelledLeavesQueue(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	la, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A deadline ends the wait.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = b.Mutex("x").Lock(dctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded", err)
	}
	if w := waiters(t, cl, "x"); len(w) != 0 {
		t.Fatalf("waiters right after the cancelled Lock returned: %v", w)
	}

	// So does a cancel, once the waiter is queued.
	cctx, cancel2 := context.WithCancel(ctx)
	res := lockAsync(cctx, b.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "b to queue", func() bool { return len(waiters(t, cl, "x")) == 1 })
	cancel2()
	if r := recv(t, res); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Lock: %v, want Canceled", r.err)
	}
	if w := waiters(t, cl, "x"); len(w) != 0 {
		t.Fatalf("waiters right after the cancelled Lock returned: %v", w)
	}
	// Nobody is handed the lock when a lets go.
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := cl.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders)+len(info.Waiters) != 0 {
		t.Fatalf("lock after release: %+v, want free", info)
	}
	// An already cancelled ctx sends nothing.
	if _, err := b.Mutex("x").Lock(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a done ctx: %v", err)
	}
}

// TestCancelRacesGrant cancels waits at the moment the lock is handed to
// them: whichever wins, the waiter ends up either holding (Lock returned a
// lease) or neither holding nor waiting. Each way the race can go must
// have been taken: the grant reached Lock first (it returned the lease);
// the grant was applied first but Lock gave up (the library released
// what it was granted: the lock's history shows b's hold); the cancel was
// applied first (b never held the lock).
func TestCancelRacesGrant(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	var won, grantedAbandoned, cancelled [3]int
	for i := range 60 {
		name := fmt.Sprintf("race/%d", i)
		la, err := a.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		res := lockAsync(cctx, b.Mutex(name))
		embedtest.WaitFor(t, 5*time.Second, "b to queue", func() bool { return len(waiters(t, cl, name)) == 1 })
		switch i % 3 {
		case 0: // the cancel is sent first
			cancel()
			go la.Release(ctx)
		case 1: // both at once
			go la.Release(ctx)
			cancel()
		case 2: // the grant is applied first; the cancel loses
			if err := la.Release(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		r := recv(t, res)
		info, err := cl.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if r.err == nil {
			won[i%3]++
			if len(info.Holders) != 1 || info.Holders[0].SessionID != b.ID() {
				t.Fatalf("round %d: Lock won but the holders are %+v", i, info.Holders)
			}
			if err := r.lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("round %d: %v", i, r.err)
		}
		for _, h := range info.Holders {
			if h.SessionID == b.ID() {
				t.Fatalf("round %d: Lock was cancelled but b holds the lock: %+v", i, info)
			}
		}
		if len(info.Waiters) != 0 {
			t.Fatalf("round %d: waiters left %+v", i, info.Waiters)
		}
		if slices.ContainsFunc(info.History, func(h PastHold) bool { return h.SessionID == b.ID() }) {
			grantedAbandoned[i%3]++
		} else {
			cancelled[i%3]++
		}
	}
	t.Logf("by case (cancel first, at once, grant first): Lock returned the lease %v, the grant was applied but Lock gave up %v, the cancel was applied first %v",
		won, grantedAbandoned, cancelled)
	// Each way is taken in many of the rounds, so missing one in 60
	// rounds means the race was not run.
	sum := func(n [3]int) int { return n[0] + n[1] + n[2] }
	for _, way := range []struct {
		what string
		n    [3]int
	}{{"Lock returned the lease", won}, {"the grant was applied but Lock gave up", grantedAbandoned}, {"the cancel was applied first", cancelled}} {
		if sum(way.n) == 0 {
			t.Errorf("in no round: %s", way.what)
		}
	}
}

func TestReentrancyByOwnerKey(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl)
	m1 := s.Mutex("r", WithOwnerKey("worker-1"))
	l1, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Another handle with the same key re-enters the same hold.
	l2, err := s.Mutex("r", WithOwnerKey("worker-1")).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() != l1.Token() {
		t.Fatalf("reentrant token %d, want %d", l2.Token(), l1.Token())
	}
	info, _ := cl.Get(ctx, "r")
	if len(info.Holders) != 1 || info.Holders[0].Count != 2 || info.Holders[0].OwnerKey != "worker-1" {
		t.Fatalf("holders %+v, want one with count 2", info.Holders)
	}
	// Another key of the same session is another owner.
	if _, err := s.Mutex("r", WithOwnerKey("worker-2")).TryLock(ctx); !errors.Is(err, ErrLockBusy) {
		t.Fatalf("other key: %v, want ErrLockBusy", err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l2.Err() == nil || l1.Err() != nil {
		t.Fatalf("after one Unlock: l1 %v, l2 %v; want l2 released, l1 valid", l1.Err(), l2.Err())
	}
	info, _ = cl.Get(ctx, "r")
	if len(info.Holders) != 1 || info.Holders[0].Count != 1 {
		t.Fatalf("holders after one Unlock %+v, want count 1", info.Holders)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, _ = cl.Get(ctx, "r"); len(info.Holders) != 0 {
		t.Fatalf("holders after both released %+v", info.Holders)
	}
	if _, err := s.Mutex("r", WithOwnerKey("worker-2")).TryLock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTryLockMany(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	if _, err := a.Mutex("m/b").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	leases, missed, err := b.TryLockMany(ctx, "m/a", "m/b", "m/c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leases {
		got = append(got, l.Name())
	}
	if !slices.Equal(got, []string{"m/a", "m/c"}) || !slices.Equal(missed, []string{"m/b"}) {
		t.Fatalf("got %v missed %v", got, missed)
	}
	if leases[0].Token() != leases[1].Token() {
		t.Fatalf("one entry grants one token: %d %d", leases[0].Token(), leases[1].Token())
	}
	if _, _, err := b.TryLockMany(ctx, "m/a", "m/a"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("duplicate names: %v", err)
	}
}

func TestSessionCloseReleasesAndWakesWaiters(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	la, err := a.Mutex("c").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := lockAsync(ctx, b.Mutex("c"))
	embedtest.WaitFor(t, 5*time.Second, "b to queue", func() bool { return len(waiters(t, cl, "c")) == 1 })
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if !errors.Is(a.Err(), ErrSessionClosed) || !errors.Is(la.Err(), ErrSessionClosed) {
		t.Fatalf("after Close: session %v, lease %v", a.Err(), la.Err())
	}
	if r := recv(t, res); r.err != nil || r.lease.Token() <= la.Token() {
		t.Fatalf("waiter after close: %+v", r)
	}
	if _, err := a.Mutex("d").TryLock(ctx); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("TryLock on a closed session: %v", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewSessionRejectsBadOptions(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	for _, o := range []SessionOption{WithTTL(time.Millisecond), WithTTL(time.Hour)} {
		if _, err := cl.NewSession(ctx, o); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("NewSession: %v, want ErrInvalidArgument", err)
		}
	}
	s := newSession(t, cl)
	if _, err := s.Mutex("").TryLock(ctx); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("TryLock(\"\"): %v, want ErrInvalidArgument", err)
	}
	if s.State() != StateHealthy {
		t.Fatalf("state %v", s.State())
	}
}
