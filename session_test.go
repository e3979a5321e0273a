package baton

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// eventLog records a session's events.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
	ch  chan Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan Event, 100)} }

func (e *eventLog) record(ev Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	e.ch <- ev
}

// next waits for the next event of state st.
func (e *eventLog) next(t *testing.T, st State, within time.Duration) Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev := <-e.ch:
			if ev.State == st {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %v event within %v", st, within)
		}
	}
}

// keepAliveRounds lets s's keepalives run for several rounds (one every
// TTL/3), so that the session outlives the deadline its open set; then
// it sends one more, between two of the loop's, and returns when it was
// sent, once it is answered. On synctest's clock, with no network delay,
// that is also when the server received it: the server's deadline is
// that instant + TTL.
func keepAliveRounds(t *testing.T, s *Session, ttl time.Duration) time.Time {
	t.Helper()
	time.Sleep(2*ttl + ttl/2)
	s.sendKeepAlive()
	sent := time.Now()
	synctest.Wait() // answered: the clock stands still until all block
	if s.State() != StateHealthy {
		t.Fatalf("session %v after %v of keepalives", s.State(), 2*ttl+ttl/2)
	}
	return sent
}

// lastKeepAlive is keepAliveRounds, after which s sends no keepalive.
func lastKeepAlive(t *testing.T, s *Session, ttl time.Duration) time.Time {
	t.Helper()
	sent := keepAliveRounds(t, s, ttl)
	s.keepalive.testPaused.Store(true)
	return sent
}

// TestClientDeclaresLossBeforeHandoff: a holder's keepalives stop after
// several were answered, the last sent (and received) at an instant
// last. On synctest's clock, with no network delay or scheduling slack,
// the client declares its Lease lost (jeopardy) at exactly last + TTL -
// SafetyMargin(TTL), strictly before the server's deadline last + TTL,
// and the server hands the lock on at that deadline and not before: the
// proposal time of the expiry that granted the waiter, and the waiter's
// Lock returning. DESIGN.md §5.5.
func TestClientDeclaresLossBeforeHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		const ttl = time.Second
		events := newEventLog()
		a := newSession(t, cl, WithTTL(ttl), WithEvents(events.record))
		b := newSession(t, cl)
		la, err := a.Mutex("x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lostAt := whenLost(la)
		res := lockAsync(ctx, b.Mutex("x"))
		synctest.Wait()
		if w := waiters(t, cl, "x"); len(w) != 1 {
			t.Fatalf("waiters %v, want b", w)
		}

		last := lastKeepAlive(t, a, ttl)
		if r := la.Remaining(); r != ttl-SafetyMargin(ttl) {
			t.Fatalf("Remaining %v right after a keepalive was answered, want TTL - margin = %v", r, ttl-SafetyMargin(ttl))
		}
		clientDeadline, serverDeadline := last.Add(ttl-SafetyMargin(ttl)), last.Add(ttl)
		r := recv(t, res)
		if r.err != nil {
			t.Fatal(r.err)
		}
		info, err := cl.Get(ctx, "x")
		if err != nil || len(info.Holders) != 1 {
			t.Fatalf("get: %+v %v", info, err)
		}
		handoff := info.Holders[0].Since // the leader's clock when it proposed the expiry
		lost := <-lostAt                 // by the expiry, if not before
		t.Logf("ttl %v, margin %v; after the last keepalive: Lease.Lost +%v, server handoff +%v, waiter's Lock returned +%v",
			ttl, SafetyMargin(ttl), lost.Sub(last), handoff.Sub(last), r.at.Sub(last))
		if !lost.Equal(clientDeadline) {
			t.Errorf("Lease lost at last keepalive +%v, want at TTL - margin, +%v", lost.Sub(last), clientDeadline.Sub(last))
		}
		if !lost.Before(serverDeadline) {
			t.Errorf("the client declared the loss at +%v, not before the server's deadline +%v", lost.Sub(last), serverDeadline.Sub(last))
		}
		if handoff.Before(serverDeadline) || r.at.Before(serverDeadline) {
			t.Errorf("the server handed the lock on at last keepalive +%v (the waiter got it at +%v), before its deadline +%v",
				handoff.Sub(last), r.at.Sub(last), serverDeadline.Sub(last))
		}
		if jeopardy := events.next(t, StateJeopardy, ttl); !jeopardy.At.Equal(clientDeadline) {
			t.Errorf("jeopardy at last keepalive +%v, want at TTL - margin, +%v", jeopardy.At.Sub(last), clientDeadline.Sub(last))
		}
		if !errors.Is(la.Err(), ErrJeopardy) || !errors.Is(context.Cause(la.Context()), ErrJeopardy) || la.Valid() {
			t.Fatalf("lease after jeopardy: err %v cause %v valid %v", la.Err(), context.Cause(la.Context()), la.Valid())
		}
		if r.lease.Token() <= la.Token() {
			t.Fatalf("waiter token %d, want > %d", r.lease.Token(), la.Token())
		}
		<-a.Done()
		if !errors.Is(a.Err(), ErrSessionLost) {
			t.Fatalf("session err %v", a.Err())
		}
		if _, err := a.Mutex("y").TryLock(ctx); !errors.Is(err, ErrSessionLost) {
			t.Fatalf("TryLock on an expired session: %v", err)
		}
	})
}

// TestExpiredSessionFailsWaitersAtOnce: a waiter whose own session expires
// fails with ErrSessionLost when it expires on the server, not after the
// holder lets go (etcd#19597).
func TestExpiredSessionFailsWaitersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		holder := newSession(t, cl)
		if _, err := holder.Mutex("x").Lock(ctx); err != nil {
			t.Fatal(err)
		}
		const ttl = time.Second
		w := newSession(t, cl, WithTTL(ttl))
		res := lockAsync(ctx, w.Mutex("x"))
		synctest.Wait()
		if ws := waiters(t, cl, "x"); len(ws) != 1 {
			t.Fatalf("waiters %v, want w", ws)
		}
		last := lastKeepAlive(t, w, ttl)
		r := recv(t, res)
		if !errors.Is(r.err, ErrSessionLost) {
			t.Fatalf("waiter of an expired session: %v, want ErrSessionLost", r.err)
		}
		// The server's expiry, at its deadline, ends the wait; the client
		// would give up on its own a TTL past its deadline.
		if want := last.Add(ttl); !r.at.Equal(want) {
			t.Fatalf("the wait failed at last keepalive +%v, want at the server's expiry, +%v", r.at.Sub(last), want.Sub(last))
		}
		if ws := waiters(t, cl, "x"); len(ws) != 0 {
			t.Fatalf("waiters %v", ws)
		}
	})
}

// TestBlacklistEvictsSession: an operator's blacklist refuses the
// session's acquires and keepalives; the client declares it lost at its
// next keepalive, and the server hands its locks on when it expires, a
// TTL after its last keepalive.
func TestBlacklistEvictsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		const ttl = time.Second
		a := newSession(t, cl, WithTTL(ttl))
		b := newSession(t, cl)
		la, err := a.Mutex("x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := lockAsync(ctx, b.Mutex("x"))
		synctest.Wait()
		if w := waiters(t, cl, "x"); len(w) != 1 {
			t.Fatalf("waiters %v, want b", w)
		}
		last := keepAliveRounds(t, a, ttl)
		if err := cl.Blacklist(ctx, a.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Mutex("y").TryLock(ctx); !errors.Is(err, ErrBlacklisted) && !errors.Is(err, ErrSessionLost) {
			t.Fatalf("TryLock of a blacklisted session: %v", err)
		}
		// Its next keepalive, a TTL/3 later at most, is refused: the client
		// declares the session lost then, before the server's deadline.
		select {
		case <-a.Done():
		case <-time.After(ttl):
			t.Fatal("blacklisted session not lost")
		}
		if lost := time.Now(); lost.Sub(last) > ttl/3 {
			t.Fatalf("blacklisted session lost at last keepalive +%v, want within a keepalive's interval, %v", lost.Sub(last), ttl/3)
		}
		if !errors.Is(a.Err(), ErrSessionLost) || !errors.Is(a.Err(), ErrBlacklisted) {
			t.Fatalf("session err %v, want ErrSessionLost and ErrBlacklisted", a.Err())
		}
		select {
		case <-la.Lost():
		default:
			t.Fatal("lease of the blacklisted session not lost")
		}
		r := recv(t, res)
		if r.err != nil || r.lease.Token() <= la.Token() {
			t.Fatalf("waiter after blacklist: %+v", r)
		}
		if want := last.Add(ttl); !r.at.Equal(want) {
			t.Fatalf("the waiter got the lock at last keepalive +%v, want at the blacklisted session's expiry, +%v", r.at.Sub(last), want.Sub(last))
		}
	})
}

// TestSessionSurvivesLeaderChange stops the leader of a 3-node cluster:
// the session and its hold remain, the client resumes on the new leader,
// a wait queued before the failover is granted after it (its acquire
// re-sent with its original seq), and a release there works.
func TestSessionSurvivesLeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	lead := c.WaitLeader()
	// Dial a follower first: the client must follow the leader hint.
	cl := dial(t, c.Endpoints((lead+1)%3))
	ctx := testCtx(t)
	events := newEventLog()
	a := newSession(t, cl, WithTTL(5*time.Second), WithEvents(events.record))
	b := newSession(t, cl, WithTTL(5*time.Second))
	la, err := a.Mutex("held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Mutex("queued").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := lockAsync(ctx, a.Mutex("queued"))
	embedtest.WaitFor(t, 5*time.Second, "a to queue", func() bool { return len(waiters(t, cl, "queued")) == 1 })

	stopped := time.Now()
	c.Stop(lead)
	lead2 := c.WaitLeader()
	if lead2 == lead {
		t.Fatal("the stopped member still leads")
	}
	// A new request on the session goes through once it resumed.
	lt, err := a.Mutex("after").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session usable on the new leader %v after the old one stopped", time.Since(stopped))
	if err := la.Err(); err != nil {
		t.Fatalf("hold lost across the failover: %v", err)
	}
	info, err := cl.Get(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].SessionID != a.ID() || info.Holders[0].Token != la.Token() {
		t.Fatalf("holders after failover %+v, want session %d token %d", info.Holders, a.ID(), la.Token())
	}
	// The wait queued before the failover was re-sent with its original
	// seq: still one waiter, not two.
	if w := waiters(t, cl, "queued"); len(w) != 1 || w[0] != a.ID() {
		t.Fatalf("waiters after failover %v, want [%d]", w, a.ID())
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, res)
	if r.err != nil || r.lease.Token() <= lb.Token() {
		t.Fatalf("queued wait after failover: %+v (b's token %d)", r, lb.Token())
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lt.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, _ := cl.Get(ctx, "held"); len(info.Holders) != 0 {
		t.Fatalf("held after release: %+v", info.Holders)
	}
	events.mu.Lock()
	defer events.mu.Unlock()
	for _, ev := range events.evs {
		if ev.State == StateExpired || ev.State == StateJeopardy {
			t.Fatalf("session event %v across the failover", ev.State)
		}
	}
}

// TestJeopardyThenSafe: a keepalive answered after the client's deadline
// but before the server's makes the session safe again; the leases lost
// in the jeopardy stay lost while their hold survives on the server.
func TestJeopardyThenSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		const ttl = time.Second
		events := newEventLog()
		a := newSession(t, cl, WithTTL(ttl), WithEvents(events.record))
		la, err := a.Mutex("x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := lastKeepAlive(t, a, ttl)
		jeopardy := events.next(t, StateJeopardy, 3*ttl)
		if want := last.Add(ttl - SafetyMargin(ttl)); !jeopardy.At.Equal(want) {
			t.Fatalf("jeopardy at last keepalive +%v, want at TTL - margin, +%v", jeopardy.At.Sub(last), want.Sub(last))
		}
		// At once: the server's deadline is the margin away.
		a.keepalive.testPaused.Store(false)
		a.sendKeepAlive()
		if safe := events.next(t, StateSafe, 3*ttl); !safe.At.Equal(jeopardy.At) {
			t.Fatalf("safe at last keepalive +%v, want at once (+%v)", safe.At.Sub(last), jeopardy.At.Sub(last))
		}
		if a.State() != StateHealthy || !errors.Is(la.Err(), ErrJeopardy) {
			t.Fatalf("after safe: state %v, lease err %v", a.State(), la.Err())
		}
		if held, err := cl.Check(ctx, "x", la.Token()); err != nil || !held {
			t.Fatalf("hold after safe: %v %v", held, err)
		}
		// The lost lease still releases its hold; a fresh Lock gets a valid one.
		if err := la.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l2, err := a.Mutex("x").Lock(ctx)
		if err != nil || !l2.Valid() {
			t.Fatalf("Lock after safe: %v", err)
		}
	})
}
