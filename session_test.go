package baton

import (
	"context"
	"errors"
	"sync"
	"testing"
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

// TestClientDeclaresLossBeforeHandoff stops a holder's keepalives and
// measures two instants: when the holder's client declares its Lease lost
// (jeopardy), and when the server hands the lock on (the proposal time of
// the expiry that granted the waiter, and the waiter's Lock returning).
// DESIGN.md §5.5: the first must come before the second.
func TestClientDeclaresLossBeforeHandoff(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	const ttl = time.Second
	events := newEventLog()
	a := newSession(t, cl, WithTTL(ttl), WithEvents(events.record))
	b := newSession(t, cl)
	la, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lostAt := make(chan time.Time, 1)
	go func() {
		<-la.Lost()
		lostAt <- time.Now()
	}()
	res := lockAsync(ctx, b.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "b to queue", func() bool { return len(waiters(t, cl, "x")) == 1 })

	paused := time.Now()
	a.keepalive.testPaused.Store(true)
	jeopardy := events.next(t, StateJeopardy, 3*ttl)
	lost := <-lostAt
	r := recv(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	info, err := cl.Get(ctx, "x")
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("get: %+v %v", info, err)
	}
	handoff := info.Holders[0].Since // the leader's clock when it proposed the expiry
	expired := events.next(t, StateExpired, 3*ttl)

	t.Logf("ttl %v, margin %v; after pausing keepalives: jeopardy +%v, Lease.Lost +%v, server handoff +%v, waiter's Lock returned +%v, expired event +%v",
		ttl, SafetyMargin(ttl), jeopardy.At.Sub(paused), lost.Sub(paused), handoff.Sub(paused.Round(0)), r.at.Sub(paused), expired.At.Sub(paused))
	t.Logf("loss declared %v before the server's handoff, %v before the waiter got the lock",
		handoff.Sub(lost.Round(0)), r.at.Sub(lost))
	if !lost.Round(0).Before(handoff) || !lost.Before(r.at) || !jeopardy.At.Before(r.at) {
		t.Fatalf("client declared the loss at %v, the server handed the lock on at %v (waiter got it at %v)", lost, handoff, r.at)
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
}

// TestExpiredSessionFailsWaitersAtOnce: a waiter whose own session expires
// fails with ErrSessionLost, not after the holder lets go (etcd#19597).
func TestExpiredSessionFailsWaitersAtOnce(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	holder := newSession(t, cl)
	if _, err := holder.Mutex("x").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w := newSession(t, cl, WithTTL(time.Second))
	res := lockAsync(ctx, w.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "w to queue", func() bool { return len(waiters(t, cl, "x")) == 1 })
	w.keepalive.testPaused.Store(true)
	r := recv(t, res)
	if !errors.Is(r.err, ErrSessionLost) {
		t.Fatalf("waiter of an expired session: %v, want ErrSessionLost", r.err)
	}
	if ws := waiters(t, cl, "x"); len(ws) != 0 {
		t.Fatalf("waiters %v", ws)
	}
}

// TestBlacklistEvictsSession: an operator's blacklist refuses the
// session's acquires and keepalives; the client declares it lost, and the
// server later hands its locks on.
func TestBlacklistEvictsSession(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a := newSession(t, cl, WithTTL(time.Second))
	b := newSession(t, cl)
	la, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := lockAsync(ctx, b.Mutex("x"))
	embedtest.WaitFor(t, 5*time.Second, "b to queue", func() bool { return len(waiters(t, cl, "x")) == 1 })
	if err := cl.Blacklist(ctx, a.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mutex("y").TryLock(ctx); !errors.Is(err, ErrBlacklisted) && !errors.Is(err, ErrSessionLost) {
		t.Fatalf("TryLock of a blacklisted session: %v", err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("blacklisted session not lost")
	}
	if !errors.Is(a.Err(), ErrSessionLost) || !errors.Is(a.Err(), ErrBlacklisted) {
		t.Fatalf("session err %v, want ErrSessionLost and ErrBlacklisted", a.Err())
	}
	r := recv(t, res)
	if r.err != nil || r.lease.Token() <= la.Token() {
		t.Fatalf("waiter after blacklist: %+v", r)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("lease of the blacklisted session not lost")
	}
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

// TestJeopardyThenSafe: a keepalive answered after the deadline but before
// the server's own makes the session safe again; the leases lost in the
// jeopardy stay lost while their hold survives on the server.
func TestJeopardyThenSafe(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	events := newEventLog()
	a := newSession(t, cl, WithTTL(time.Second), WithEvents(events.record))
	la, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.keepalive.testPaused.Store(true)
	events.next(t, StateJeopardy, 3*time.Second)
	a.keepalive.testPaused.Store(false)
	a.sendKeepAlive() // at once: the server's deadline is still ~margin away
	events.next(t, StateSafe, 3*time.Second)
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
}
