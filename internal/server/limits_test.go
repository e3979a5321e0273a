package server

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOpenSlots: an open is refused exactly when the live sessions fill
// every place. One that finds the places taken by opens in flight waits
// for their outcome: an open that applied is counted both as live and in
// flight until its outcome arrives, and one in flight may fail.
func TestOpenSlots(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	var o openSlots
	live := 0
	count := func() (int, int, bool) { return live, 0, false }
	lim := openLimits{total: limit}
	reserve := func() (bool, error) { return o.reserve(ctx, lim, count) }

	// Two opens in flight take both places.
	for i := range 2 {
		if ok, err := reserve(); !ok || err != nil {
			t.Fatalf("open %d of %d: %v, %v", i+1, limit, ok, err)
		}
	}
	// The first applied (live, and still in flight until its outcome
	// arrives); the second will fail. A third open waits for them.
	live = 1
	looked := make(chan struct{}, 8)
	got := make(chan error, 1)
	go func() {
		ok, err := o.reserve(ctx, lim, func() (int, int, bool) {
			looked <- struct{}{}
			return count()
		})
		if err == nil && !ok {
			err = errors.New("taken for a retry")
		}
		got <- err
	}()
	// look waits for the open's next look at the places; it must not have
	// ended yet.
	look := func(what string) {
		t.Helper()
		select {
		case <-looked:
		case err := <-got:
			t.Fatalf("%s: the open ended (%v) instead of waiting", what, err)
		}
	}
	look("first look")  // both places taken, none by live sessions alone
	o.release("")       // the first's outcome: it stays live
	look("second look") // one place live, one in flight
	o.release("")       // the second failed
	<-looked            // a place is free
	if err := <-got; err != nil {
		t.Fatalf("an open once an open in flight failed: %v", err)
	}

	// Live sessions in every place: refused at once.
	live = limit
	if ok, err := reserve(); ok || !errors.Is(err, errTooManySessions) {
		t.Fatalf("open with %d live sessions of %d: %v, %v; want errTooManySessions", live, limit, ok, err)
	}
	// A retry of a live session's open takes no place.
	if ok, err := o.reserve(ctx, lim, func() (int, int, bool) { return live, 0, true }); ok || err != nil {
		t.Fatalf("a retried open: %v, %v; want no place and no error", ok, err)
	}
	// A wait ends with its ctx.
	live = 1
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.reserve(cctx, lim, count); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose ctx ended: %v", err)
	}
}

// TestOpenSlotsPerUser: a user's opens are refused exactly when its live
// sessions fill its places, whatever other users hold, and wait while
// its own opens in flight take the rest; a user's places count toward
// the total too.
func TestOpenSlotsPerUser(t *testing.T) {
	ctx := context.Background()
	var o openSlots
	live := map[string]int{}
	total := func() int { return live["alice"] + live["bob"] + live[""] }
	count := func(user string) func() (int, int, bool) {
		return func() (int, int, bool) { return total(), live[user], false }
	}
	perUser := func(user string) openLimits { return openLimits{total: 10, user: user, perUser: 2} }

	live["alice"] = 2
	ok, err := o.reserve(ctx, perUser("alice"), count("alice"))
	if ok || !errors.Is(err, errTooManyUserSessions) || !errors.Is(err, errTooManySessions) {
		t.Fatalf("alice's open with 2 live sessions of 2: %v, %v; want errTooManyUserSessions", ok, err)
	}
	for _, want := range []string{`user "alice"`, "--max-sessions-per-user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	// Another user, and an open counted by no user (authentication off),
	// still open.
	if ok, err := o.reserve(ctx, perUser("bob"), count("bob")); !ok || err != nil {
		t.Fatalf("bob's open: %v, %v", ok, err)
	}
	if ok, err := o.reserve(ctx, openLimits{total: 10}, count("")); !ok || err != nil {
		t.Fatalf("an open of no user: %v, %v", ok, err)
	}
	// bob's open in flight and one live session take both of his places:
	// his next open waits for the outcome of the one in flight.
	live["bob"] = 1
	looked := make(chan struct{}, 8)
	got := make(chan error, 1)
	go func() {
		ok, err := o.reserve(ctx, perUser("bob"), func() (int, int, bool) {
			looked <- struct{}{}
			return count("bob")()
		})
		if err == nil && !ok {
			err = errors.New("taken for a retry")
		}
		got <- err
	}()
	look := func(what string) {
		t.Helper()
		select {
		case <-looked:
		case err := <-got:
			t.Fatalf("%s: bob's open ended (%v) instead of waiting", what, err)
		}
	}
	look("first look")
	o.release("") // another user's outcome: bob's places are still taken
	look("after another user's outcome")
	o.release("bob") // his open in flight failed
	<-looked
	if err := <-got; err != nil {
		t.Fatalf("bob's open once his open in flight failed: %v", err)
	}
	if n := o.byUser["bob"]; n != 1 || o.n != 1 {
		t.Fatalf("%d opens in flight, %d of them bob's; want 1 and 1", o.n, n)
	}
	// The total limit holds for every user.
	live["alice"], live["bob"] = 1, 9
	if ok, err := o.reserve(ctx, perUser("alice"), count("alice")); ok || !errors.Is(err, errTooManySessions) || errors.Is(err, errTooManyUserSessions) {
		t.Fatalf("alice's open with the cluster full: %v, %v; want errTooManySessions", ok, err)
	}
}
