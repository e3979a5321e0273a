package baton

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// silence stops s's keepalives (its stream stays up, other sessions'
// reconnects go on), so that its session expires on the server; it
// returns when s's Lease l is lost.
func silence(s *Session, l *Lease) time.Time {
	lostAt := whenLost(l)
	s.keepalive.testPaused.Store(true)
	return <-lostAt
}

// expiredAt waits until the hold of name with token has ended, and
// returns when: the wall clock of the leader that proposed the entry that
// ended it (on synctest's clock, the instant it applied).
func expiredAt(t *testing.T, cl *Client, name string, token uint64) time.Time {
	t.Helper()
	for {
		info, err := cl.Get(testCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range info.History {
			if p.Token == token {
				return p.Ended
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// releaseHandsOnAtOnce queues next for l's lock, releases l, and checks
// that next got the lock at the release's instant: a clean release
// starts no lock-delay.
func releaseHandsOnAtOnce(t *testing.T, cl *Client, l *Lease, next *Mutex) {
	t.Helper()
	ch := lockAsync(testCtx(t), next)
	for len(waiters(t, cl, l.Name())) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	released := time.Now()
	if err := l.Release(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); r.err != nil || !r.at.Equal(released) {
		t.Fatalf("after a clean release the next holder got the lock %v later (%v), want at once", r.at.Sub(released), r.err)
	}
}

// TestLockDelay: on synctest's clock, a hold with a lock-delay whose
// session expires keeps its lock from everyone for exactly the delay
// after the server's expiry (the client's Lease is lost at least a margin
// before that): a waiter gets it then, a try in between is told until when, Get
// shows it. A clean release of a hold with a lock-delay hands the lock on
// at once; so does a hold-limit expiry of a hold without one. A member's
// default applies to acquires that state none.
func TestLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 3 * time.Second
		_, cl := singleInMemory(t, embedtest.Configure(func(_ int, cfg *embed.Config) {
			cfg.LockDelayByPrefix = map[string]time.Duration{"slow/": 2 * time.Second}
		}))
		ctx := testCtx(t)
		a := newSession(t, cl, WithTTL(2*time.Second))
		b, c := newSession(t, cl), newSession(t, cl)
		la, err := a.Mutex("jobs/x", WithLockDelay(delay)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if la.LockDelay() != delay {
			t.Fatalf("Lease.LockDelay %v, want %v", la.LockDelay(), delay)
		}
		if info, err := cl.Get(ctx, "jobs/x"); err != nil || len(info.Holders) != 1 || info.Holders[0].LockDelay != delay {
			t.Fatalf("Get shows %+v, %v; want the hold's lock-delay %v", info, err, delay)
		}
		bch := lockAsync(ctx, b.Mutex("jobs/x", WithLockDelay(delay)))
		lost := silence(a, la)
		expired := expiredAt(t, cl, "jobs/x", la.Token())
		if expired.Before(lost.Add(SafetyMargin(a.TTL()))) {
			t.Fatalf("a's session expired %v after its Lease was lost, before the margin %v", expired.Sub(lost), SafetyMargin(a.TTL()))
		}

		// Within the delay: nobody holds it, b still waits, a try is BUSY
		// until the delay's end.
		time.Sleep(time.Until(expired.Add(delay / 2)))
		_, err = c.Mutex("jobs/x").TryLock(ctx)
		var busy *BusyError
		if !errors.As(err, &busy) || busy.DelayedUntil.IsZero() || busy.Holder.SessionID != 0 {
			t.Fatalf("TryLock in the lock-delay: %v, want a BusyError with DelayedUntil and no holder", err)
		}
		if want := expired.Add(delay); busy.DelayedUntil.Sub(want).Abs() > time.Second {
			t.Errorf("DelayedUntil %v, want about %v", busy.DelayedUntil, want)
		}
		info, err := cl.Get(ctx, "jobs/x")
		if err != nil || len(info.Holders) != 0 || info.DelayedUntil.IsZero() {
			t.Fatalf("Get in the lock-delay: %+v, %v", info, err)
		}
		if w := waiters(t, cl, "jobs/x"); len(w) != 1 || w[0] != b.ID() {
			t.Fatalf("waiters in the lock-delay %v, want b's", w)
		}

		rb := recv(t, bch)
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		if want := expired.Add(delay); !rb.at.Equal(want) {
			t.Errorf("b got the lock %v after a's session expired, want the lock-delay, %v", rb.at.Sub(expired), delay)
		}
		if rb.lease.Token() <= la.Token() {
			t.Fatalf("token %d after %d", rb.lease.Token(), la.Token())
		}

		// A clean release starts no delay: c gets it at once.
		releaseHandsOnAtOnce(t, cl, rb.lease, c.Mutex("jobs/x"))

		// The member's default for a prefix, and none asked for.
		ld, err := c.Mutex("slow/1").TryLock(ctx)
		if err != nil || ld.LockDelay() != 2*time.Second {
			t.Fatalf("default lock-delay of slow/: %v, %v", ld.LockDelay(), err)
		}
		ln, err := c.Mutex("slow/2", WithLockDelay(0)).TryLock(ctx)
		if err != nil || ln.LockDelay() != 0 {
			t.Fatalf("WithLockDelay(0) under slow/: %v, %v", ln.LockDelay(), err)
		}
		if _, err := c.Mutex("jobs/z", WithLockDelay(1500*time.Millisecond)).TryLock(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("lock-delay of 1.5s: %v, want ErrInvalidArgument", err)
		}
	})
}

// TestLockDelayAcrossLeaderChange: a lock-delay that started under one
// leader holds the lock from everyone under the next, which times it
// afresh, in full, from its election; a clean release under the new
// leader hands the lock on at once.
func TestLockDelayAcrossLeaderChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 5 * time.Second
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		cl := dialCluster(t, c, (lead+1)%3)
		ctx := testCtx(t)
		a := newSession(t, cl, WithTTL(2*time.Second))
		b, w := newSession(t, cl), newSession(t, cl)
		la, err := a.Mutex("jobs/y", WithLockDelay(delay)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bch := lockAsync(ctx, b.Mutex("jobs/y"))
		silence(a, la)
		expired := expiredAt(t, cl, "jobs/y", la.Token())
		time.Sleep(time.Until(expired.Add(time.Second)))
		if info, err := cl.Get(ctx, "jobs/y"); err != nil || len(info.Holders) != 0 || info.DelayedUntil.IsZero() {
			t.Fatalf("Get in the lock-delay: %+v, %v", info, err)
		}

		stopped := time.Now()
		c.Stop(lead)
		if c.WaitLeader() == lead {
			t.Fatal("the stopped member still leads")
		}
		rb := recv(t, bch)
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		// The new leader could not know how long the delay had run: it
		// gives it its whole length from its election, after the stop.
		if rb.at.Before(stopped.Add(delay)) {
			t.Errorf("b got the lock %v after the leader stopped, within the lock-delay %v that the new leader restarts",
				rb.at.Sub(stopped), delay)
		}

		releaseHandsOnAtOnce(t, cl, rb.lease, w.Mutex("jobs/y"))
	})
}
