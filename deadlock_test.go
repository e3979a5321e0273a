package baton

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// TestDeadlockOverHTTP: over HTTP/JSON a DEADLOCK refusal is a 409 whose
// message names the cycle in one line and whose details carry it.
func TestDeadlockOverHTTP(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	base := "http://" + c.ClientAddr(0)
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %s: %v", path, resp.Status, err)
		}
		return resp.StatusCode, out
	}
	a := newSession(t, cl, WithOwner("a")) // and the member leads
	const secret = "deadlock-http-secret-0123456"
	_, opened := post("/v1/sessions", `{"owner": "http", "ttl": "30s", "secret": "`+secret+`"}`)
	h, ok := opened["session_id"].(string)
	if !ok {
		t.Fatalf("open: %v", opened)
	}
	header := func(seq int) string {
		return fmt.Sprintf(`"header": {"session_id": %q, "seq": "%d", "secret": %q}`, h, seq, secret)
	}
	if code, out := post("/v1/locks/acquire", "{"+header(1)+`, "name": "y"}`); code != http.StatusOK || out["acquired"] != true {
		t.Fatalf("acquire y: %d %v", code, out)
	}
	if _, err := a.Mutex("x").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	aWaits := lockAsync(ctx, a.Mutex("y"))
	embedtest.WaitFor(t, 5*time.Second, "a to queue for y", func() bool { return len(waiters(t, cl, "y")) == 1 })

	code, out := post("/v1/locks/acquire", "{"+header(2)+`, "name": "x", "wait": true}`)
	msg, _ := out["message"].(string)
	wantMsg := fmt.Sprintf(`deadlock: session %s waits for lock "x" held by session %d, session %d waits for lock "y" held by session %s`, h, a.ID(), a.ID(), h)
	if code != http.StatusConflict || msg != wantMsg {
		t.Fatalf("acquire x: %d %q, want 409 %q", code, msg, wantMsg)
	}
	details, _ := json.Marshal(out["details"])
	if !strings.Contains(string(details), `"DEADLOCK"`) || !strings.Contains(string(details), `"blockerSessionId"`) &&
		!strings.Contains(string(details), `"blocker_session_id"`) {
		t.Fatalf("details %s: want the reason and the cycle", details)
	}
	a.Close(ctx) // a lets go of x, and its wait for y ends
	<-aWaits
}

// TestGoroutinesSharingAKey: two goroutines of one session lock x with
// the default key while session b holds it, so both wait. When b lets
// go, both are granted together as one hold (one token, count 2): an
// acquire by that key a moment later would have re-entered at once, so
// the second does not wait for its own hold. x passes to another holder
// only after both released.
func TestGoroutinesSharingAKey(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b, c := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b")), newSession(t, cl, WithOwner("c"))
	held, err := b.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := lockAsync(ctx, a.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "a's first wait", func() bool { return len(waiters(t, cl, "x")) == 1 })
	third := lockAsync(ctx, c.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "c's wait", func() bool { return len(waiters(t, cl, "x")) == 2 })
	second := lockAsync(ctx, a.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "a's second wait", func() bool { return len(waiters(t, cl, "x")) == 3 })

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r1, r2 := recv(t, first), recv(t, second)
	if r1.err != nil || r2.err != nil {
		t.Fatalf("a's waits: %v, %v", r1.err, r2.err)
	}
	if r1.lease.Token() != r2.lease.Token() {
		t.Fatalf("a's two leases have tokens %d and %d, want one hold", r1.lease.Token(), r2.lease.Token())
	}
	if q := waiters(t, cl, "x"); len(q) != 1 || q[0] != c.ID() {
		t.Fatalf("x's queue %+v, want c alone", q)
	}
	if err := r1.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-third:
		t.Fatalf("c got x while a still held it once: %+v", r)
	default:
	}
	if err := r2.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, third); r.err != nil || r.lease.Token() <= r1.lease.Token() {
		t.Fatalf("c's wait: %+v, want the lock with a larger token", r)
	}
}

// TestDeadlockAtAGrant: a's key k waits for x and y at once (two
// goroutines); b holds y and waits for x behind a. When x's holder lets
// go, x goes to a, whose wait for y now waits on b, which waits for x:
// that Lock fails with ErrDeadlock naming the cycle, instead of hanging
// until its context ends, and b gets x once a releases it.
func TestDeadlockAtAGrant(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b, z := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b")), newSession(t, cl, WithOwner("z"))
	zx, err := z.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex("y").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	ax := lockAsync(ctx, a.Mutex("x", WithOwnerKey("k")))
	embedtest.WaitFor(t, 5*time.Second, "a to queue for x", func() bool { return len(waiters(t, cl, "x")) == 1 })
	ay := lockAsync(ctx, a.Mutex("y", WithOwnerKey("k")))
	embedtest.WaitFor(t, 5*time.Second, "a to queue for y", func() bool { return len(waiters(t, cl, "y")) == 1 })
	bx := lockAsync(ctx, b.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "b to queue for x", func() bool { return len(waiters(t, cl, "x")) == 2 })

	if err := zx.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := recv(t, ax)
	if got.err != nil {
		t.Fatalf("a's wait for x: %v", got.err)
	}
	r := recv(t, ay)
	if !errors.Is(r.err, ErrDeadlock) {
		t.Fatalf("a's wait for y: %v, want ErrDeadlock", r.err)
	}
	de, ok := errors.AsType[*DeadlockError](r.err)
	if !ok {
		t.Fatalf("a's wait for y: %T, want a *DeadlockError", r.err)
	}
	want := []DeadlockEdge{
		{SessionID: a.ID(), OwnerKey: "k", Lock: "y", BlockerSessionID: b.ID()},
		{SessionID: b.ID(), Lock: "x", BlockerSessionID: a.ID(), BlockerOwnerKey: "k"},
	}
	if !slices.Equal(de.Cycle, want) {
		t.Fatalf("cycle %+v, want %+v", de.Cycle, want)
	}
	if err := got.lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, bx); r.err != nil {
		t.Fatalf("b's wait for x: %v", r.err)
	}
}
