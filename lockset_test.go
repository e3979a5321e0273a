package baton

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// holders returns the session ids holding name.
func holders(t *testing.T, cl *Client, name string) []uint64 {
	t.Helper()
	info, err := cl.Get(testCtx(t), name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	var out []uint64
	for _, h := range info.Holders {
		out = append(out, h.SessionID)
	}
	slices.Sort(out)
	return out
}

// TestLockSetOfMixed: one set takes a mutex, a read hold beside another
// reader and a semaphore permit, all in one entry; the permit counts
// against its semaphore, and a set with a busy member (the full
// semaphore, a writer beside readers) takes nothing at all.
func TestLockSetOfMixed(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b, c := newSession(t, cl), newSession(t, cl), newSession(t, cl)
	if _, err := b.RWMutex("cfg", WithMaxReaders(4)).RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Semaphore("pool", 2).Acquire(ctx); err != nil {
		t.Fatal(err)
	}

	set := a.LockSetOf(a.Mutex("m"), a.RWMutex("cfg", WithMaxReaders(4)).Reader(), a.Semaphore("pool", 2))
	if got := set.Names(); !slices.Equal(got, []string{"m", "cfg", "pool"}) {
		t.Fatalf("Names = %v", got)
	}
	leases, err := set.TryLockAll(ctx)
	if err != nil {
		t.Fatalf("TryLockAll of a mixed set: %v", err)
	}
	if len(leases) != 3 || leases[0].Name() != "m" || leases[1].Name() != "cfg" || leases[2].Name() != "pool" {
		t.Fatalf("leases %v, want m, cfg, pool in order", leases)
	}
	if tok := leases[0].Token(); leases[1].Token() != tok || leases[2].Token() != tok {
		t.Fatalf("one entry granted the set, yet tokens %d %d %d", tok, leases[1].Token(), leases[2].Token())
	}
	both := []uint64{a.ID(), b.ID()}
	slices.Sort(both)
	if got := holders(t, cl, "cfg"); !slices.Equal(got, both) {
		t.Fatalf("cfg held by %v, want the two readers %v", got, both)
	}
	if got := holders(t, cl, "pool"); !slices.Equal(got, both) {
		t.Fatalf("pool held by %v, want its two permits %v", got, both)
	}

	// The semaphore is full: c's set takes nothing, and says why.
	_, err = c.LockSetOf(c.Mutex("n"), c.Semaphore("pool", 2)).TryLockAll(ctx)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Name != "pool" {
		t.Fatalf("a set with a full semaphore: %v, want a BusyError naming pool", err)
	}
	// A writer cannot sit beside the readers: nothing taken either.
	if _, err := c.LockSetOf(c.Mutex("n"), c.RWMutex("cfg", WithMaxReaders(4)).Writer()).TryLockAll(ctx); !errors.As(err, &busy) || busy.Name != "cfg" {
		t.Fatalf("a set with a writer beside readers: %v, want a BusyError naming cfg", err)
	}
	if got := holders(t, cl, "n"); len(got) != 0 {
		t.Fatalf("a refused set took n: held by %v", got)
	}

	// Each on its own: the free ones granted, the full one named.
	got, missed, err := c.LockSetOf(c.Mutex("n"), c.RWMutex("cfg", WithMaxReaders(4)).Reader(), c.Semaphore("pool", 2)).TryLockMany(ctx)
	if err != nil || len(got) != 2 || !slices.Equal(missed, []string{"pool"}) {
		t.Fatalf("TryLockMany = %v, %v, %v; want n and cfg granted, pool missed", got, missed, err)
	}

	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := holders(t, cl, "pool"); !slices.Equal(got, []uint64{b.ID()}) {
		t.Fatalf("pool held by %v after the set's release, want %d", got, b.ID())
	}
}

// TestLockSetOfWaitsInFIFOOrder: sets that wait are granted in the order
// they came, each whole, whatever the modes of their other members.
func TestLockSetOfWaitsInFIFOOrder(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	h, s1, s2 := newSession(t, cl), newSession(t, cl), newSession(t, cl)
	held, err := h.Mutex("q").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type setResult struct {
		leases []*Lease
		err    error
	}
	lockAll := func(ls *LockSet) <-chan setResult {
		ch := make(chan setResult, 1)
		go func() {
			l, err := ls.LockAll(ctx)
			ch <- setResult{l, err}
		}()
		return ch
	}
	first := lockAll(s1.LockSetOf(s1.Mutex("q"), s1.RWMutex("doc").Reader()))
	embedtest.WaitFor(t, 5*time.Second, "the first set to queue", func() bool { return len(waiters(t, cl, "q")) == 1 })
	second := lockAll(s2.LockSetOf(s2.Semaphore("pool", 2), s2.Mutex("q")))
	embedtest.WaitFor(t, 5*time.Second, "the second set to queue", func() bool { return len(waiters(t, cl, "q")) == 2 })
	if got := waiters(t, cl, "q"); !slices.Equal(got, []uint64{s1.ID(), s2.ID()}) {
		t.Fatalf("q's queue %v, want %d then %d", got, s1.ID(), s2.ID())
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r setResult
	select {
	case r = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first set was not granted after q's release")
	}
	if r.err != nil || len(r.leases) != 2 || r.leases[0].Name() != "q" || r.leases[1].Name() != "doc" {
		t.Fatalf("first set: %v, %v", r.leases, r.err)
	}
	select {
	case r2 := <-second:
		t.Fatalf("the second set was granted while the first holds q: %v, %v", r2.leases, r2.err)
	default:
	}
	if got := waiters(t, cl, "q"); !slices.Equal(got, []uint64{s2.ID()}) {
		t.Fatalf("q's queue %v, want the second set %d", got, s2.ID())
	}
	for _, l := range r.leases {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second set was not granted after the first let go")
	}
	if r.err != nil || len(r.leases) != 2 || r.leases[0].Name() != "pool" || r.leases[1].Name() != "q" {
		t.Fatalf("second set: %v, %v", r.leases, r.err)
	}
}

// TestLockSetOfRefusals: a set no request may take fails at once with an
// error naming what is wrong, and takes nothing; a permit stating another
// size than its semaphore's holders is refused whole by the server.
func TestLockSetOfRefusals(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	tests := []struct {
		name string
		set  *LockSet
		want string
	}{
		{"a name twice", a.LockSetOf(a.Mutex("x"), a.Mutex("y"), a.Mutex("x")),
			`lock set names "x" twice: members 1 (mutex "x") and 3 (mutex "x")`},
		{"one semaphore of two sizes", a.LockSetOf(a.Semaphore("pool", 3), a.Semaphore("pool", 4)),
			`lock set names "pool" twice: members 1 (a permit of semaphore "pool" (3 permits)) and 2 (a permit of semaphore "pool" (4 permits))`},
		{"read and write of one lock", a.LockSetOf(a.RWMutex("doc").Reader(), a.RWMutex("doc").Writer()),
			`lock set names "doc" twice`},
		{"other hold options", a.LockSetOf(a.Mutex("x"), a.Semaphore("pool", 3, WithOwnerKey("k"))),
			`lock set member 2 of 2 (a permit of semaphore "pool" (3 permits)) states other hold options`},
		{"another session's handle", a.LockSetOf(a.Mutex("x"), b.Mutex("y")),
			"is a handle of session"},
		{"a bad semaphore", a.LockSetOf(a.Mutex("x"), a.Semaphore("pool", 0)),
			`lock set member 2 of 2 (a permit of semaphore "pool" (0 permits))`},
		{"a bad name", a.LockSetOf(a.Mutex("")), "lock name is empty"},
		{"nil", a.LockSetOf(a.Mutex("x"), nil), "lock set member 2 of 2 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for what, try := range map[string]func() error{
				"TryLockAll":  func() error { _, err := tt.set.TryLockAll(ctx); return err },
				"TryLockMany": func() error { _, _, err := tt.set.TryLockMany(ctx); return err },
				"LockAll":     func() error { _, err := tt.set.LockAll(ctx); return err },
			} {
				if err := try(); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("%s: %v, want ErrInvalidArgument saying %q", what, err, tt.want)
				}
			}
		})
	}
	for _, name := range []string{"x", "y", "pool", "doc"} {
		if got := holders(t, cl, name); len(got) != 0 {
			t.Fatalf("a refused set took %s: held by %v", name, got)
		}
	}

	// pool has 2 permits as b uses it; a set stating 3 is refused whole.
	if _, err := b.Semaphore("pool", 2).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LockSetOf(a.Mutex("x"), a.Semaphore("pool", 3)).TryLockAll(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("a permit of another size: %v, want ErrLimitMismatch", err)
	}
	if got := holders(t, cl, "x"); len(got) != 0 {
		t.Fatalf("a refused set took x: held by %v", got)
	}
}
