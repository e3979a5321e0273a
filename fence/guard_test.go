package fence

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestDoWritesInTokenOrderUnderConcurrency has many goroutines write to a
// few resources through one Guard with tokens that rise over time, some
// written late, and checks what the writes themselves saw: no two writes
// of a resource at once, and each accepted write's token at least that of
// every write accepted before it. A Guard that admitted a stale token, or
// ran two writes of a resource at once, fails it.
func TestDoWritesInTokenOrderUnderConcurrency(t *testing.T) {
	const (
		resources  = 4
		goroutines = 16
		writes     = 400 // per goroutine
	)
	g := NewGuard(0)
	names := [resources]string{"inventory/a", "inventory/b", "inventory/c", "inventory/d"}
	var (
		inflight   [resources]atomic.Int32
		mu         sync.Mutex // guards logs and the counts below
		logs       [resources][]uint64
		overlaps   int
		accepted   int
		refused    int
		violations int
	)
	var clock atomic.Uint64
	var wg sync.WaitGroup
	for gi := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(gi)))
			for range writes {
				r := rng.IntN(resources)
				// Grants happen over time, and a holder may write late:
				// a token a little behind the newest.
				now := clock.Add(1)
				tok := now - min(now-1, rng.Uint64N(16))
				err := g.Do(context.Background(), names[r], tok, func() error {
					if inflight[r].Add(1) != 1 {
						mu.Lock()
						overlaps++
						mu.Unlock()
					}
					mu.Lock()
					last := uint64(0)
					if n := len(logs[r]); n > 0 {
						last = logs[r][n-1]
					}
					mu.Unlock()
					runtime.Gosched() // let another write of r in, if the Guard would
					mu.Lock()
					if tok < last {
						violations++
					}
					logs[r] = append(logs[r], tok)
					accepted++
					mu.Unlock()
					inflight[r].Add(-1)
					return nil
				})
				if errors.Is(err, ErrStale) {
					mu.Lock()
					refused++
					mu.Unlock()
				} else if err != nil {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if overlaps > 0 || violations > 0 {
		t.Errorf("%d writes overlapped another of their resource, %d saw a higher token written before them", overlaps, violations)
	}
	if accepted+refused != goroutines*writes {
		t.Errorf("accepted %d + refused %d != %d writes", accepted, refused, goroutines*writes)
	}
	// Both must have happened for the test to have tested anything.
	if accepted < resources || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the test exercised nothing", accepted, refused)
	}
	for r, log := range logs {
		for i := 1; i < len(log); i++ {
			if log[i] < log[i-1] {
				t.Errorf("%s: accepted write %d has token %d after %d", names[r], i, log[i], log[i-1])
			}
		}
		if seen, ok := g.Seen(names[r]); len(log) > 0 && (!ok || seen != log[len(log)-1]) {
			t.Errorf("%s: Seen = %d, %v; want the last accepted token %d", names[r], seen, ok, log[len(log)-1])
		}
	}
	t.Logf("accepted %d writes, refused %d", accepted, refused)
}

// TestDoRefusesWaitersOnceANewerTokenIsAdmitted: a stale holder whose
// write waits behind the resource's current write is refused when a newer
// holder is admitted meanwhile, and its write never runs.
func TestDoRefusesWaitersOnceANewerTokenIsAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGuard(0)
		release := make(chan struct{})
		var first, second error
		ranSecond := false
		go func() {
			first = g.Do(t.Context(), "r", 5, func() error { <-release; return nil })
		}()
		synctest.Wait() // the first write runs
		go func() {
			second = g.Do(t.Context(), "r", 5, func() error { ranSecond = true; return nil })
		}()
		synctest.Wait() // the second waits for its turn
		if err := g.Check("r", 7); err != nil {
			t.Fatalf("Check(7): %v", err)
		}
		close(release)
		synctest.Wait()
		if first != nil {
			t.Errorf("first write: %v", first)
		}
		var stale *StaleTokenError
		if !errors.As(second, &stale) || stale.Token != 5 || stale.Seen != 7 || stale.Forgotten {
			t.Errorf("second write: %v; want a stale token 5, seen 7", second)
		}
		if ranSecond {
			t.Error("the refused write ran")
		}
	})
}

// TestDoWaitEndsWithCtx: ctx bounds the wait for the resource's earlier
// write, and the waiting token stays admitted.
func TestDoWaitEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGuard(0)
		release := make(chan struct{})
		go g.Do(t.Context(), "r", 5, func() error { <-release; return nil })
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		go func() { err = g.Do(ctx, "r", 6, func() error { return nil }) }()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do after cancel: %v; want context.Canceled", err)
		}
		if seen, _ := g.Seen("r"); seen != 6 {
			t.Errorf("Seen = %d; want 6", seen)
		}
		close(release)
	})
}

func TestCheck(t *testing.T) {
	g := NewGuard(0)
	for _, c := range []struct {
		tok   uint64
		stale bool
	}{{10, false}, {9, true}, {10, false}, {11, false}, {10, true}, {1, true}} {
		err := g.Check("jobs/42", c.tok)
		if got := errors.Is(err, ErrStale); got != c.stale {
			t.Errorf("Check(%d) = %v; want stale %v", c.tok, err, c.stale)
		}
	}
	err := g.Check("jobs/42", 3)
	var stale *StaleTokenError
	if !errors.As(err, &stale) || *stale != (StaleTokenError{Resource: "jobs/42", Token: 3, Seen: 11}) {
		t.Errorf("Check(3) = %#v", err)
	}
	if err := g.Check("jobs/43", 1); err != nil {
		t.Errorf("another resource's first token: %v", err)
	}
}

// TestForgettingNeverAdmitsAStaleToken runs a seeded random stream of
// checks against a small Guard and a reference that forgets nothing: the
// Guard may refuse what the reference admits (a resource it forgot, below
// the floor) but must never admit a token below the highest the reference
// admitted for the resource; and it stays within its limit.
func TestForgettingNeverAdmitsAStaleToken(t *testing.T) {
	const limit = 8
	g := NewGuard(limit)
	seen := map[string]uint64{} // the reference: every token the Guard admitted
	rng := rand.New(rand.NewPCG(26, 1))
	var admitted, forgotten, floorAdmits int
	clock := uint64(1) // Baton's tokens rise over time; old holders linger
	for i := range 20000 {
		clock += rng.Uint64N(3)
		r := string(rune('a' + rng.IntN(32)))
		tok := clock - min(clock-1, rng.Uint64N(40))
		_, known := g.Seen(r)
		floor := g.Floor()
		err := g.Check(r, tok)
		var stale *StaleTokenError
		switch {
		case err == nil:
			if tok < seen[r] {
				t.Fatalf("step %d: admitted %s token %d after admitting %d", i, r, tok, seen[r])
			}
			seen[r] = tok
			admitted++
			if !known && floor > 0 {
				floorAdmits++
			}
		case errors.As(err, &stale) && stale.Forgotten:
			if known || tok >= floor || stale.Seen != floor {
				t.Fatalf("step %d: %v (remembered %v, floor %d)", i, err, known, floor)
			}
			forgotten++
		case errors.As(err, &stale):
			if tok >= seen[r] {
				t.Fatalf("step %d: refused %s token %d, highest admitted %d: %v", i, r, tok, seen[r], err)
			}
		default:
			t.Fatalf("step %d: %v", i, err)
		}
		if n := g.Len(); n > limit {
			t.Fatalf("step %d: remembers %d resources; limit %d", i, n, limit)
		}
	}
	if forgotten == 0 || floorAdmits == 0 || admitted == 0 {
		t.Fatalf("admitted %d, %d above the floor after forgetting, refused %d below it: the stream did not exercise forgetting", admitted, floorAdmits, forgotten)
	}
	t.Logf("admitted %d (%d of forgotten resources above the floor); refused %d below the floor", admitted, floorAdmits, forgotten)
}

// TestWritingResourceIsNotForgotten: a resource whose write is under way
// stays remembered past the limit, so a stale token for it is still
// refused by its own token, not let in at the floor; the Guard is back
// within its limit once the write ends.
func TestWritingResourceIsNotForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGuard(2)
		release := make(chan struct{})
		go g.Do(t.Context(), "busy", 100, func() error { <-release; return nil })
		synctest.Wait()
		for i, r := range []string{"x", "y", "z"} {
			if err := g.Check(r, uint64(1+i)); err != nil {
				t.Fatal(err)
			}
		}
		if seen, ok := g.Seen("busy"); !ok || seen != 100 {
			t.Fatalf("busy forgotten during its write (Seen %d, %v)", seen, ok)
		}
		if err := g.Check("busy", 99); !errors.Is(err, ErrStale) {
			t.Errorf("stale token for the busy resource: %v", err)
		}
		close(release)
		synctest.Wait()
		if n := g.Len(); n > 2 {
			t.Errorf("remembers %d resources after the write; limit 2", n)
		}
	})
}

func TestSetFloor(t *testing.T) {
	g := NewGuard(0)
	g.SetFloor(50)
	g.SetFloor(40) // never lowers
	if err := g.Check("new", 49); !errors.Is(err, ErrStale) {
		t.Errorf("token below the floor: %v", err)
	}
	if err := g.Check("new", 50); err != nil {
		t.Errorf("token at the floor: %v", err)
	}
}
