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
