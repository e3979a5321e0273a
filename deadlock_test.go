package baton

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// TestLockDeadlockRefused: two sessions take two locks in opposite
// orders. The Lock that would close the cycle is refused at once with
// ErrDeadlock, a *DeadlockError naming the cycle, and queues nothing;
// the other session's wait goes on, and is granted when the refused
// session lets go of its lock.
func TestLockDeadlockRefused(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b"))
	if _, err := a.Mutex("x").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	yb, err := b.Mutex("y").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aWaits := lockAsync(ctx, a.Mutex("y"))
	embedtest.WaitFor(t, 5*time.Second, "a to queue for y", func() bool { return len(waiters(t, cl, "y")) == 1 })

	// No one lets go of anything: if b's Lock waited, it would wait
	// until ctx ends. The refusal is the answer to its one request.
	_, err = b.Mutex("x").Lock(ctx)
	if !errors.Is(err, ErrDeadlock) {
		t.Fatalf("b's Lock of x: %v, want ErrDeadlock", err)
	}
	de, ok := errors.AsType[*DeadlockError](err)
	if !ok {
		t.Fatalf("%T is not a *DeadlockError", err)
	}
	want := []DeadlockEdge{
		{SessionID: b.ID(), Lock: "x", BlockerSessionID: a.ID()},
		{SessionID: a.ID(), Lock: "y", BlockerSessionID: b.ID()},
	}
	if !slices.Equal(de.Cycle, want) {
		t.Fatalf("cycle %+v, want %+v", de.Cycle, want)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, `waits for lock "x" held by session`) {
		t.Fatalf("message %q: want one line naming the cycle", msg)
	}
	if q := waiters(t, cl, "x"); len(q) != 0 {
		t.Fatalf("x has waiters %v after the refusal", q)
	}

	// The other proceeds once b gives up y.
	if err := yb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, aWaits); r.err != nil {
		t.Fatalf("a's wait for y: %v", r.err)
	}
}
