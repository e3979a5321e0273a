package baton

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// acquireAsync runs acquire on a goroutine.
func acquireAsync(ctx context.Context, acquire func(context.Context) (*Lease, error)) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := acquire(ctx)
		ch <- lockResult{l, err, time.Now()}
	}()
	return ch
}

// notYet fails if ch already has a result.
func notYet(t *testing.T, ch <-chan lockResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %+v", what, r)
	default:
	}
}

func TestSemaphore(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	var ss []*Session
	for range 4 {
		ss = append(ss, newSession(t, cl))
	}
	var leases []*Lease
	for _, s := range ss[:3] {
		l, err := s.Semaphore("pool/db", 3).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if _, err := ss[3].Semaphore("pool/db", 3).TryAcquire(ctx); !errors.Is(err, ErrLockBusy) {
		t.Fatalf("fourth permit of three: %v, want ErrLockBusy", err)
	}
	info, err := cl.Get(ctx, "pool/db")
	if err != nil {
		t.Fatal(err)
	}
	if info.Limit != 3 || len(info.Holders) != 3 || !info.Holders[0].Shared {
		t.Fatalf("lock record %+v, want 3 shared holders of limit 3", info)
	}
	// A waiter gets the permit of the first release, with a larger token.
	ch := acquireAsync(ctx, ss[3].Semaphore("pool/db", 3).Acquire)
	embedtest.WaitFor(t, 5*time.Second, "the fourth to queue", func() bool { return len(waiters(t, cl, "pool/db")) == 1 })
	notYet(t, ch, "Acquire of a full semaphore")
	if err := leases[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, l := range leases {
		if r.lease.Token() <= l.Token() {
			t.Fatalf("token of the new permit %d, want > %d", r.lease.Token(), l.Token())
		}
	}
	// Another kind of lock under the name is refused and changes nothing.
	if _, err := ss[1].Mutex("pool/db").TryLock(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("mutex on a semaphore: %v, want ErrLimitMismatch", err)
	}
	if _, err := ss[1].Semaphore("pool/db", 4).TryAcquire(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("semaphore of 4 on one of 3: %v, want ErrLimitMismatch", err)
	}
	for _, n := range []int{0, -1, MaxHolders + 1} {
		if _, err := ss[1].Semaphore("pool/x", n).TryAcquire(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("semaphore of %d: %v, want ErrInvalidArgument", n, err)
		}
	}
	if info, err := cl.Get(ctx, "pool/db"); err != nil || len(info.Holders) != 3 {
		t.Fatalf("after refusals: %+v, %v", info, err)
	}
	list, err := cl.List(ctx, "pool/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Holders != 3 || list[0].Limit != 3 {
		t.Fatalf("List: %+v", list)
	}
}

func TestRWMutex(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	r1, r2, w, r3 := newSession(t, cl), newSession(t, cl), newSession(t, cl), newSession(t, cl)

	l1, err := r1.RWMutex("doc").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := r2.RWMutex("doc").TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RWMutex("doc").TryLock(ctx); !errors.Is(err, ErrLockBusy) {
		t.Fatalf("TryLock beside readers: %v, want ErrLockBusy", err)
	}
	// A writer queues; a reader after it waits for it (no starvation).
	wch := acquireAsync(ctx, w.RWMutex("doc").Lock)
	embedtest.WaitFor(t, 5*time.Second, "the writer to queue", func() bool { return len(waiters(t, cl, "doc")) == 1 })
	rch := acquireAsync(ctx, r3.RWMutex("doc").RLock)
	embedtest.WaitFor(t, 5*time.Second, "the reader to queue", func() bool { return len(waiters(t, cl, "doc")) == 2 })
	if _, err := r3.RWMutex("doc", WithOwnerKey("try")).TryRLock(ctx); !errors.Is(err, ErrLockBusy) {
		t.Fatalf("TryRLock behind a waiting writer: %v, want ErrLockBusy", err)
	}
	// A reader cannot become a writer under its key.
	if _, err := r1.RWMutex("doc").TryLock(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("upgrade: %v, want ErrLimitMismatch", err)
	}
	if err := r1.RWMutex("doc").RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	notYet(t, wch, "Lock beside a reader")
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wr := recv(t, wch)
	if wr.err != nil {
		t.Fatal(wr.err)
	}
	if wr.lease.Token() <= max(l1.Token(), l2.Token()) {
		t.Fatalf("writer's token %d, readers' %d and %d", wr.lease.Token(), l1.Token(), l2.Token())
	}
	info, err := cl.Get(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].Shared || info.Holders[0].SessionID != w.ID() ||
		len(info.Waiters) != 1 || !info.Waiters[0].Shared || info.Limit != DefaultMaxReaders {
		t.Fatalf("lock record while the writer holds it: %+v", info)
	}
	notYet(t, rch, "RLock beside the writer")
	if err := w.RWMutex("doc").Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if rr := recv(t, rch); rr.err != nil || rr.lease.Token() <= wr.lease.Token() {
		t.Fatalf("reader after the writer: %+v", rr)
	}
	if _, err := r1.RWMutex("doc", WithMaxReaders(5)).TryRLock(ctx); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("another reader limit: %v, want ErrLimitMismatch", err)
	}
}

func TestTryLockAll(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	lb, err := b.Mutex("res/2").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"res/1", "res/2", "res/3"}
	_, err = a.TryLockAll(ctx, names...)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Name != "res/2" || busy.Holder.SessionID != b.ID() {
		t.Fatalf("TryLockAll with res/2 held: %v", err)
	}
	list, err := cl.List(ctx, "res/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "res/2" {
		t.Fatalf("a refused TryLockAll took something: %+v", list)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	leases, err := a.TryLockAll(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leases {
		got = append(got, l.Name())
		if l.Token() != leases[0].Token() {
			t.Fatalf("one entry, one token: %d and %d", l.Token(), leases[0].Token())
		}
	}
	if !slices.Equal(got, names) {
		t.Fatalf("leases for %v, want %v", got, names)
	}
}

// TestLockAll: two sessions take overlapping sets named in opposite
// orders, over and over; neither deadlocks, and while one holds a set the
// other holds none of its locks. A LockAll whose ctx ends keeps nothing.
func TestLockAll(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl), newSession(t, cl)
	sets := [][]string{{"acct/1", "acct/2", "acct/3"}, {"acct/3", "acct/2", "acct/1"}}
	errs := make(chan error, 2)
	for i, s := range []*Session{a, b} {
		go func() {
			for range 20 {
				leases, err := s.LockAll(ctx, sets[i]...)
				if err != nil {
					errs <- err
					return
				}
				for j, l := range leases {
					if l.Name() != sets[i][j] || !l.Valid() {
						errs <- errors.New("lease out of order or invalid")
						return
					}
				}
				for _, l := range leases {
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// b holds acct/2; a's LockAll takes acct/1 (name order), waits for
	// acct/2, and gives up: it keeps nothing.
	lb, err := b.Mutex("acct/2").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := a.LockAll(short, "acct/3", "acct/2", "acct/1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockAll past its deadline: %v", err)
	}
	embedtest.WaitFor(t, 5*time.Second, "a to hold nothing", func() bool {
		list, err := cl.List(ctx, "acct/")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.Holder != nil && l.Holder.SessionID == a.ID() || l.Waiters > 0 {
				return false
			}
		}
		return true
	})
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.LockAll(ctx, "x", "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("LockAll naming a lock twice: %v", err)
	}
}
