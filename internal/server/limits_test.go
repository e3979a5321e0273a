package server

import (
	"context"
	"errors"
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
	count := func() (int, bool) { return live, false }
	reserve := func() (bool, error) { return o.reserve(ctx, limit, count) }

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
		ok, err := o.reserve(ctx, limit, func() (int, bool) {
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
	o.release()         // the first's outcome: it stays live
	look("second look") // one place live, one in flight
	o.release()         // the second failed
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
	if ok, err := o.reserve(ctx, limit, func() (int, bool) { return live, true }); ok || err != nil {
		t.Fatalf("a retried open: %v, %v; want no place and no error", ok, err)
	}
	// A wait ends with its ctx.
	live = 1
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := o.reserve(cctx, limit, count); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose ctx ended: %v", err)
	}
}
