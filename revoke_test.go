package baton

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// TestRevokeHonoured: on synctest's clock, a holder asked to let go is
// told at once (RevokeRequested, Revocation, an Event), Get shows the
// revoke's deadline, and a release within the grace ends the hold as any
// release does: the waiter gets the lock at once with a larger token,
// and the leader ends nothing later.
func TestRevokeHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		var mu sync.Mutex
		var events []Event
		a := newSession(t, cl, WithEvents(func(ev Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}))
		b := newSession(t, cl)
		la, err := a.Mutex("jobs/x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-la.RevokeRequested():
			t.Fatal("RevokeRequested closed before any revoke")
		default:
		}
		next := lockAsync(ctx, b.Mutex("jobs/x"))
		for len(waiters(t, cl, "jobs/x")) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		asked := time.Now()
		revs, err := cl.RevokeLock(ctx, "jobs/x", WithGrace(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != 1 || revs[0].Token != la.Token() || revs[0].Grace != 5*time.Second || !revs[0].Deadline.Equal(asked.Add(5*time.Second)) {
			t.Fatalf("RevokeLock answered %+v; want the hold with token %d, grace 5s, deadline %v", revs, la.Token(), asked.Add(5*time.Second))
		}
		<-la.RevokeRequested()
		if time.Since(asked) != 0 {
			t.Fatalf("the holder was told %v after the revoke, want at once", time.Since(asked))
		}
		if r, ok := la.Revocation(); !ok || r != revs[0] {
			t.Fatalf("Lease.Revocation = %+v, %v; want %+v", r, ok, revs[0])
		}
		info, err := cl.Get(ctx, "jobs/x")
		if err != nil {
			t.Fatal(err)
		}
		if h := info.Holders[0]; h.RevokeGrace != 5*time.Second || !h.RevokeDeadline.Equal(revs[0].Deadline) {
			t.Fatalf("Get shows the holder %+v; want its revoke deadline %v", h, revs[0].Deadline)
		}
		// Asked again: the first revocation stands.
		again, err := cl.RevokeLock(ctx, "jobs/x", WithGrace(time.Second))
		if err != nil || len(again) != 1 || again[0] != revs[0] {
			t.Fatalf("a second revoke: %+v, %v; want the first %+v", again, err, revs[0])
		}

		time.Sleep(2 * time.Second) // finishing its step
		if err := la.Release(ctx); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		r := recv(t, next)
		if r.err != nil || !r.at.Equal(released) || r.lease.Token() <= la.Token() {
			t.Fatalf("the waiter: %v at +%v with token %d; want the lock at the release with a token above %d", r.err, r.at.Sub(released), r.lease.Token(), la.Token())
		}
		time.Sleep(10 * time.Second) // past the grace: the leader ends nothing
		if err := r.lease.Err(); err != nil {
			t.Fatalf("the next holder's lease after the old grace: %v", err)
		}
		info, err = cl.Get(testCtx(t), "jobs/x")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.History) == 0 || info.History[0].Token != la.Token() || info.History[0].How != "released" {
			t.Fatalf("history %+v; want the revoked hold released", info.History)
		}
		mu.Lock()
		defer mu.Unlock()
		var told []Revocation
		for _, ev := range events {
			if ev.Revoked != nil {
				told = append(told, *ev.Revoked)
			}
		}
		if len(told) != 1 || told[0] != revs[0] {
			t.Fatalf("events told %+v; want one for %+v", told, revs[0])
		}
	})
}

// TestRevokeIgnored: on synctest's clock, a holder that does not let go
// is ended by the leader exactly when the grace passes: its Lease is
// lost with ErrRevoked (and ErrNotHeld), Check of its token answers
// false, the waiter gets the lock with a larger token, and the history
// says revoked.
func TestRevokeIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		a, b := newSession(t, cl), newSession(t, cl)
		la, err := a.Mutex("jobs/y").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lost := whenLost(la)
		next := lockAsync(ctx, b.Mutex("jobs/y"))
		for len(waiters(t, cl, "jobs/y")) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		asked := time.Now()
		if _, err := cl.RevokeLock(ctx, "jobs/y", WithGrace(3*time.Second), WithRevokeToken(la.Token())); err != nil {
			t.Fatal(err)
		}
		<-la.RevokeRequested()
		at := <-lost
		if !at.Equal(asked.Add(3 * time.Second)) {
			t.Fatalf("the ignored hold ended %v after the revoke, want exactly its grace 3s", at.Sub(asked))
		}
		if err := la.Err(); !errors.Is(err, ErrRevoked) || !errors.Is(err, ErrNotHeld) {
			t.Fatalf("the lost Lease's error %v; want ErrRevoked and ErrNotHeld", err)
		}
		r := recv(t, next)
		if r.err != nil || r.lease.Token() <= la.Token() {
			t.Fatalf("the waiter: %v, token %d; want the lock with a token above %d", r.err, r.lease.Token(), la.Token())
		}
		held, err := cl.Check(ctx, "jobs/y", la.Token())
		if err != nil || held {
			t.Fatalf("Check of the revoked token: %v, %v; want false", held, err)
		}
		info, err := cl.Get(ctx, "jobs/y")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.History) == 0 || info.History[0].Token != la.Token() || info.History[0].How != "revoked" {
			t.Fatalf("history %+v; want the hold revoked", info.History)
		}
		if err := la.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("releasing the revoked Lease: %v, want ErrNotHeld", err)
		}
	})
}

// TestRevokeBadInput: an unknown lock, a grace out of range or not in
// whole milliseconds, a token the lock does not have, and (with
// authentication on) a user without admin over the name are refused
// with what is wrong, and nothing changes: the holder is not told, Get
// shows no revoke.
func TestRevokeBadInput(t *testing.T) {
	addr, _, aliceTok, root := authCluster(t)
	ctx := testCtx(t)
	alice := dial(t, addr, WithToken(aliceTok))
	s := newSession(t, alice)
	l, err := s.Mutex("jobs/z").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		err  error
		want error
		says string
	}{
		{"unknown lock", second(root.RevokeLock(ctx, "jobs/nobody")), ErrNotFound, `"jobs/nobody" is not held`},
		{"token mismatch", second(root.RevokeLock(ctx, "jobs/z", WithRevokeToken(l.Token()+1))), ErrTokenMismatch, "no hold with token"},
		{"grace too short", second(root.RevokeLock(ctx, "jobs/z", WithGrace(time.Millisecond))), ErrInvalidArgument, "outside 1s..1h0m0s"},
		{"grace too long", second(root.RevokeLock(ctx, "jobs/z", WithGrace(2*time.Hour))), ErrInvalidArgument, "outside"},
		{"bad name", second(root.RevokeLock(ctx, "")), ErrInvalidArgument, "name"},
		{"not permitted", second(alice.RevokeLock(ctx, "jobs/z")), ErrPermissionDenied, `no admin permission over "jobs/z"`},
	} {
		if !errors.Is(c.err, c.want) || !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: %v; want %v saying %q", c.what, c.err, c.want, c.says)
		}
	}
	// What the client does not check, the server does: a grace out of
	// range or not in whole milliseconds sent as is.
	for _, g := range []*durationpb.Duration{durationpb.New(500 * time.Millisecond), durationpb.New(2 * time.Hour),
		durationpb.New(time.Second + time.Microsecond), {Seconds: -1}} {
		err := root.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
			_, err := bc.Revoke(ctx, &batonpb.RevokeRequest{Name: "jobs/z", Grace: g})
			return err
		})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "grace") {
			t.Errorf("grace %v sent as is: %v; want InvalidArgument naming the grace", g.AsDuration(), err)
		}
	}
	select {
	case <-l.RevokeRequested():
		t.Fatal("a refused revoke told the holder")
	default:
	}
	info, err := root.Get(ctx, "jobs/z")
	if err != nil {
		t.Fatal(err)
	}
	if h := info.Holders[0]; h.Token != l.Token() || !h.RevokeDeadline.IsZero() || h.RevokeGrace != 0 {
		t.Fatalf("after refused revokes Get shows %+v; want the hold unrevoked", h)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the holder's Lease after refused revokes: %v", err)
	}
}

// second returns the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }

// TestRevokeWhileReconnecting: a holder whose stream is down when the
// revoke is pushed learns it from the holds its resume is sent.
func TestRevokeWhileReconnecting(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl)
	l, err := s.Mutex("jobs/r").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proceed := cutStream(t, s)
	if _, err := cl.RevokeLock(ctx, "jobs/r", WithGrace(time.Minute)); err != nil {
		t.Fatal(err)
	}
	proceed()
	select {
	case <-l.RevokeRequested():
	case <-ctx.Done():
		t.Fatal("a holder that was reconnecting when revoked was never told")
	}
	if r, ok := l.Revocation(); !ok || r.Grace != time.Minute || r.Token != l.Token() {
		t.Fatalf("Lease.Revocation = %+v, %v", r, ok)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the Lease is lost before its grace: %v", err)
	}
}

// TestRevokeOfAGrantWhoseAnswerWasLost: a waiter whose stream is down
// when it is granted the lock, and when that hold is revoked, learns both
// at its resume: the holds the resume is sent list the hold as being
// revoked before the retried wait is answered, and the Lease that answer
// makes starts revoked. A reentrant Lease of a revoked hold is revoked too.
func TestRevokeOfAGrantWhoseAnswerWasLost(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	holder, waiter := newSession(t, cl), newSession(t, cl)
	first, err := holder.Mutex("jobs/g").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Mutex("jobs/g").Lock(ctx)
		got <- result{l, err}
	}()
	waitFor(t, func() bool {
		info, err := cl.Get(ctx, "jobs/g")
		return err == nil && len(info.Waiters) == 1
	})
	proceed := cutStream(t, waiter)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	revs, err := cl.RevokeLock(ctx, "jobs/g", WithGrace(time.Minute))
	if err != nil || len(revs) != 1 || revs[0].Token <= first.Token() {
		t.Fatalf("revoke of the waiter's new hold: %+v, %v", revs, err)
	}
	proceed()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() != revs[0].Token {
		t.Fatalf("granted token %d, revoked %d", r.l.Token(), revs[0].Token)
	}
	select {
	case <-r.l.RevokeRequested():
	default:
		t.Fatal("the Lease of a hold revoked before its grant's answer came does not know it")
	}
	if rev, ok := r.l.Revocation(); !ok || rev.Token != r.l.Token() || rev.Grace != time.Minute {
		t.Fatalf("Lease.Revocation = %+v, %v", rev, ok)
	}
	again, err := waiter.Mutex("jobs/g").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Revocation(); !ok {
		t.Fatal("a reentrant Lease of a revoked hold does not know it")
	}
}
