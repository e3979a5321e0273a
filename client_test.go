package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
)

func TestErrorMapping(t *testing.T) {
	withInfo := func(code codes.Code, reason batonpb.Reason, leader string) error {
		st := status.New(code, "msg")
		info := &errdetails.ErrorInfo{Reason: reason.String(), Domain: ErrorDomain}
		if leader != "" {
			info.Metadata = map[string]string{"leader_addr": leader}
		}
		st, _ = st.WithDetails(info)
		return st.Err()
	}
	tests := []struct {
		name string
		err  error
		is   []error
		not  []error
	}{
		{"not holder", withInfo(codes.FailedPrecondition, batonpb.Reason_NOT_HOLDER, ""), []error{ErrNotHeld}, []error{ErrTokenMismatch}},
		{"token mismatch", withInfo(codes.FailedPrecondition, batonpb.Reason_TOKEN_MISMATCH, ""), []error{ErrTokenMismatch, ErrNotHeld}, nil},
		{"lock not found", withInfo(codes.NotFound, batonpb.Reason_LOCK_NOT_FOUND, ""), []error{ErrNotFound, ErrNotHeld}, nil},
		{"session expired", withInfo(codes.NotFound, batonpb.Reason_SESSION_EXPIRED, ""), []error{ErrSessionLost}, []error{ErrNotHeld}},
		{"blacklisted", withInfo(codes.PermissionDenied, batonpb.Reason_BLACKLISTED, ""), []error{ErrBlacklisted}, nil},
		{"not leader", withInfo(codes.Unavailable, batonpb.Reason_NOT_LEADER, "h:1"), []error{ErrNotLeader, ErrUnavailable}, []error{ErrOutcomeUnknown}},
		{"outcome unknown", withInfo(codes.Unavailable, batonpb.Reason_OUTCOME_UNKNOWN, ""), []error{ErrOutcomeUnknown, ErrUnavailable}, nil},
		{"overloaded", withInfo(codes.ResourceExhausted, batonpb.Reason_OVERLOADED, ""), []error{ErrOverloaded}, []error{ErrUnavailable}},
		{"wait timed out", withInfo(codes.DeadlineExceeded, batonpb.Reason_WAIT_TIMED_OUT, ""), []error{ErrWaitTimedOut}, []error{context.DeadlineExceeded}},
		{"invalid", withInfo(codes.InvalidArgument, batonpb.Reason_INVALID_ARGUMENT, ""), []error{ErrInvalidArgument}, nil},
		{"too many waiters", withInfo(codes.ResourceExhausted, batonpb.Reason_TOO_MANY_WAITERS, ""), []error{ErrTooManyWaiters}, nil},
		{"too many sessions", withInfo(codes.ResourceExhausted, batonpb.Reason_TOO_MANY_SESSIONS, ""), []error{ErrTooManySessions}, []error{ErrOverloaded, ErrUnavailable}},
		{"no space", withInfo(codes.ResourceExhausted, batonpb.Reason_NO_SPACE, ""), []error{ErrNoSpace}, []error{ErrOverloaded, ErrUnavailable, ErrTooManySessions}},
		{"transport unavailable", status.Error(codes.Unavailable, "connection refused"), []error{ErrUnavailable}, []error{ErrNotLeader}},
		{"deadline", status.Error(codes.DeadlineExceeded, "late"), []error{context.DeadlineExceeded}, nil},
		{"busy", &BusyError{Name: "x"}, []error{ErrLockBusy}, []error{ErrNotHeld}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fromStatus(tt.err)
			for _, want := range tt.is {
				if !errors.Is(err, want) {
					t.Errorf("%v: errors.Is(%v) = false", err, want)
				}
			}
			for _, not := range tt.not {
				if errors.Is(err, not) {
					t.Errorf("%v: errors.Is(%v) = true", err, not)
				}
			}
		})
	}
	if h := leaderHint(fromStatus(withInfo(codes.Unavailable, batonpb.Reason_NOT_LEADER, "h:1"))); h != "h:1" {
		t.Fatalf("leader hint %q", h)
	}
	// Every Reason but UNSPECIFIED maps to at least one sentinel.
	for v, name := range batonpb.Reason_name {
		if r := batonpb.Reason(v); r != batonpb.Reason_REASON_UNSPECIFIED && len(reasonErrors[r]) == 0 {
			t.Errorf("Reason %s has no sentinel", name)
		}
	}
}

func TestSafetyMargin(t *testing.T) {
	for _, tt := range []struct {
		ttl  string
		want string
	}{{"1s", "100ms"}, {"10s", "150ms"}, {"1m", "650ms"}} {
		ttl, _ := parseDur(tt.ttl)
		if got := SafetyMargin(ttl).String(); got != tt.want {
			t.Errorf("SafetyMargin(%s) = %s, want %s", tt.ttl, got, tt.want)
		}
	}
}

func TestOperatorCalls(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a := newSession(t, cl, WithOwner("ops/a"))
	b := newSession(t, cl, WithOwner("ops/b"))
	names := make([]string, 0, 1000)
	for i := range 1000 {
		names = append(names, fmt.Sprintf("ops/many/%04d", i))
	}
	if _, missed, err := a.TryLockMany(ctx, names...); err != nil || len(missed) != 0 {
		t.Fatalf("TryLockMany: %v %v", missed, err)
	}
	lx, err := a.Mutex("ops/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if held, err := cl.Check(ctx, "ops/x", lx.Token()); err != nil || !held {
		t.Fatalf("Check(current token) = %v, %v", held, err)
	}
	if held, err := cl.Check(ctx, "ops/x", lx.Token()-1); err != nil || held {
		t.Fatalf("Check(old token) = %v, %v", held, err)
	}
	// List follows pages (the server's page is at most 1000).
	all, err := cl.List(ctx, "ops/")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1001 || all[1000].Name != "ops/x" || all[1000].Holder == nil || all[1000].Holder.SessionID != a.ID() {
		t.Fatalf("List: %d locks, last %+v", len(all), all[len(all)-1])
	}
	ss, err := cl.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[uint64]SessionInfo{}
	for _, s := range ss {
		found[s.ID] = s
	}
	if found[a.ID()].Owner != "ops/a" || found[a.ID()].Holds != 1001 || found[b.ID()].Owner != "ops/b" {
		t.Fatalf("Sessions: %+v", ss)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Role == "" || st.LeaderAddr == "" || len(st.Members) != 1 || st.Sessions < 2 {
		t.Fatalf("Status: %+v", st)
	}

	// CasRelease by an operator: the wrong token is refused, the right one
	// frees the lock for the next holder.
	if err := cl.CasRelease(ctx, "ops/x", a.ID(), lx.Token()+1000); !errors.Is(err, ErrTokenMismatch) {
		t.Fatalf("CasRelease(wrong token): %v", err)
	}
	if err := cl.CasRelease(ctx, "ops/x", a.ID(), lx.Token()); err != nil {
		t.Fatal(err)
	}
	// The holder's session lives on: the server tells it, and its Lease
	// is lost (a `baton lock` then stops its command).
	select {
	case <-lx.Lost():
	case <-ctx.Done():
		t.Fatal("the Lease of a hold freed by CasRelease was not lost")
	}
	if err := lx.Err(); !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "CasRelease") {
		t.Fatalf("Err of a Lease freed by CasRelease: %v, want ErrNotHeld naming the CasRelease", err)
	}
	if err := cl.CasRelease(ctx, "ops/x", a.ID(), lx.Token()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second CasRelease: %v", err)
	}
	lb, err := b.Mutex("ops/x").TryLock(ctx)
	if err != nil || lb.Token() <= lx.Token() {
		t.Fatalf("TryLock after CasRelease: %v", err)
	}
	if err := lx.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a hold freed by CasRelease: %v, want ErrNotHeld", err)
	}
	if err := cl.Blacklist(ctx, 999999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Blacklist(unknown): %v", err)
	}
	if _, err := cl.Get(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Get(\"\"): %v", err)
	}
}

// TestAnswerLostAfterApply: a CasRelease applies but its answer is lost
// with the connection (gRPC's UNAVAILABLE, no Reason). The client tries
// again, and the retry finds the hold gone; it must not pass that off as
// plain NotFound, as if nothing had been released by this call.
func TestAnswerLostAfterApply(t *testing.T) {
	c, _ := single(t)
	ctx := testCtx(t)
	var cut atomic.Int32 // answers of CasRelease to lose
	lose := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if strings.HasSuffix(method, "/CasRelease") && cut.Add(-1) >= 0 {
			return status.Error(codes.Unavailable, "error reading from server: EOF")
		}
		return err
	}
	cl := dial(t, c.Endpoints(0), WithDialOptions(grpc.WithChainUnaryInterceptor(lose)), WithBackoff(time.Millisecond, time.Millisecond))
	s := newSession(t, cl)
	l, err := s.Mutex("lost/answer").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut.Store(1)
	err = cl.CasRelease(ctx, "lost/answer", s.ID(), l.Token())
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("CasRelease whose answer was lost, retried: %v; want ErrOutcomeUnknown and ErrNotFound", err)
	}
	if info, err := cl.Get(ctx, "lost/answer"); err != nil || len(info.Holders) != 0 {
		t.Fatalf("the lost attempt did not release: %+v, %v", info, err)
	}

	// A retry that succeeds is a success; an error with no lost attempt
	// before it stays what it is.
	l, err = s.Mutex("lost/answer").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.CasRelease(ctx, "lost/answer", s.ID(), l.Token()+1); !errors.Is(err, ErrTokenMismatch) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("CasRelease(wrong token): %v", err)
	}
	// Every attempt cut off: the caller learns it may have applied.
	cut.Store(1000)
	err = cl.CasRelease(ctx, "lost/answer", s.ID(), l.Token())
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CasRelease cut off every time: %v; want ErrOutcomeUnknown", err)
	}
}

// TestLockHistory: Get tells who held a lock before and how each hold
// ended, the most recent first.
func TestLockHistory(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a := newSession(t, cl, WithOwner("hist/a"))
	la, err := a.Mutex("hist/x", WithOwnerKey("ka")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := cl.NewSession(ctx, WithOwner("hist/b"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Mutex("hist/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lc, err := a.Mutex("hist/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.CasRelease(ctx, "hist/x", a.ID(), lc.Token()); err != nil {
		t.Fatal(err)
	}
	info, err := cl.Get(ctx, "hist/x")
	if err != nil {
		t.Fatal(err)
	}
	type end struct {
		owner, key, how string
		token           uint64
	}
	var got []end
	for _, p := range info.History {
		got = append(got, end{p.Owner, p.OwnerKey, p.How, p.Token})
		if p.Since.IsZero() || p.Ended.Before(p.Since) || p.EndedIndex <= p.Token {
			t.Errorf("past hold %+v: since, ended or ended index out of order", p)
		}
	}
	want := []end{
		{"hist/a", "", "cas-released", lc.Token()},
		{"hist/b", "", "session closed", lb.Token()},
		{"hist/a", "ka", "released", la.Token()},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history %+v, want %+v", got, want)
	}
	if len(info.Holders) != 0 {
		t.Fatalf("holders of a free lock: %+v", info.Holders)
	}
}

// TestOpenSessionNonce: an open with a nonce is exactly-once, here over
// HTTP/JSON: its retry answers the same session; another owner under the
// nonce, or no nonce, opens another.
func TestOpenSessionNonce(t *testing.T) {
	c, cl := single(t)
	newSession(t, cl) // the member leads
	base := "http://" + c.ClientAddr(0)
	open := func(body string) string {
		t.Helper()
		resp, err := http.Post(base+"/v1/sessions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			SessionID string `json:"session_id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("open %s: %s %v", body, resp.Status, err)
		}
		return out.SessionID
	}
	// The secret is the client's, so that its retry shows the same.
	first := open(`{"owner": "nonce/a", "ttl": "5s", "nonce": "4242", "secret": "nonce-test-secret-0123456"}`)
	if again := open(`{"owner": "nonce/a", "ttl": "5s", "nonce": "4242", "secret": "nonce-test-secret-0123456"}`); again != first {
		t.Fatalf("the retry of open %s opened %s", first, again)
	}
	if other := open(`{"owner": "nonce/b", "ttl": "5s", "nonce": "4242"}`); other == first {
		t.Fatal("another owner under the nonce got the same session")
	}
	if plain, plain2 := open(`{"owner": "nonce/a", "ttl": "5s"}`), open(`{"owner": "nonce/a", "ttl": "5s"}`); plain == plain2 {
		t.Fatal("two opens without a nonce got one session")
	}
	ss, err := cl.Sessions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s.Owner, "nonce/") {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d sessions of nonce/ owners, want 4 (the retry opened none)", n)
	}
}

func TestDialFailsWithoutMembers(t *testing.T) {
	ctx := testCtx(t)
	_, err := Dial(ctx, "127.0.0.1:1", WithMaxAttempts(2))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Dial: %v, want ErrUnavailable", err)
	}
	if _, err := Dial(ctx, " , "); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Dial(no endpoints): %v", err)
	}
}

func parseDur(s string) (d time.Duration, err error) { return time.ParseDuration(s) }

// TestHoldLostWhileReconnecting: a hold that an operator's CasRelease ends
// while the session's stream is down (its HoldLost push has nowhere to
// go) is known at the resume, from the holds the server lists then.
func TestHoldLostWhileReconnecting(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl)
	lease, err := s.Mutex("jobs/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.Mutex("jobs/y").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proceed := cutStream(t, s)
	if err := cl.CasRelease(ctx, "jobs/x", s.ID(), lease.Token()); err != nil {
		t.Fatal(err)
	}
	proceed()
	select {
	case <-lease.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease of a hold released while reconnecting is still valid")
	}
	if !errors.Is(lease.Err(), ErrNotHeld) {
		t.Fatalf("lease error %v, want ErrNotHeld", lease.Err())
	}
	if !kept.Valid() {
		t.Fatalf("the other lease was lost too: %v", kept.Err())
	}
}

// TestResumeWithManyHolds: the holds a resumed session is sent can be
// more than a client takes in one message (4 MiB); they come in pieces and
// the Sessions stream splits its messages, so the session resumes.
func TestResumeWithManyHolds(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl)
	var leases []*Lease
	for b := range 10 {
		names := make([]string, 1000)
		for i := range names {
			names[i] = fmt.Sprintf("%0440d/%d/%d", 0, b, i) // 450-byte names: 4.5 MB in all
		}
		got, busy, err := s.TryLockMany(ctx, names...)
		if err != nil || len(busy) > 0 {
			t.Fatalf("batch %d: %v, busy %d", b, err, len(busy))
		}
		leases = append(leases, got...)
	}
	s.mu.Lock()
	old := s.stream
	s.mu.Unlock()
	old.cancel()
	// A request after the break is answered on the resumed stream.
	l, err := s.Mutex("after/resume").TryLock(ctx)
	if err != nil {
		t.Fatalf("after the resume: %v", err)
	}
	s.mu.Lock()
	resumed := s.stream != nil && s.stream != old
	s.mu.Unlock()
	if !resumed {
		t.Fatal("the session did not resume on a new stream")
	}
	for _, x := range append(leases, l) {
		if !x.Valid() {
			t.Fatalf("lease of %.20s... lost: %v", x.Name(), x.Err())
		}
	}
}

// TestHoldLimit: a hold with a limit ends on the server when the limit
// passes without a renewal, though its session lives; renewals keep it;
// on synctest's clock, the client's Lease is lost at exactly the last
// renewal + limit - margin, before the server's deadline (the last renewal
// + limit), at which the next waiter gets the lock, with a larger token.
func TestHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		a, b := newSession(t, cl), newSession(t, cl)
		margin := SafetyMargin(a.TTL())
		const limit = 1500 * time.Millisecond
		m := a.Mutex("jobs/limited", WithHoldLimit(limit), WithManualRenewal())
		la, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r := la.Remaining(); r != limit-margin {
			t.Fatalf("Remaining %v with a hold limit of %v, want the limit less the margin, %v", r, limit, limit-margin)
		}
		if info, err := cl.Get(ctx, "jobs/limited"); err != nil || len(info.Holders) != 1 || info.Holders[0].HoldLimit != limit {
			t.Fatalf("Get shows %+v, %v; want the hold limit %v", info, err, limit)
		}
		lostAt := whenLost(la)
		// Renewals keep it past several limits.
		var renewed time.Time
		for range 3 {
			time.Sleep(limit / 2)
			renewed = time.Now()
			if err := la.Renew(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !la.Valid() {
			t.Fatalf("renewed lease lost: %v", la.Err())
		}
		// Without renewals: the client gives up first, then the server
		// hands the lock on.
		bch := lockAsync(ctx, b.Mutex("jobs/limited", WithHoldLimit(limit)))
		rb := recv(t, bch)
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		lost := <-lostAt
		if !errors.Is(la.Err(), ErrHoldExpired) || !errors.Is(la.Err(), ErrNotHeld) {
			t.Fatalf("lease error %v, want ErrHoldExpired", la.Err())
		}
		if want := renewed.Add(limit - margin); !lost.Equal(want) {
			t.Errorf("Lease lost at the last renewal +%v, want at the limit less the margin, +%v", lost.Sub(renewed), want.Sub(renewed))
		}
		if want := renewed.Add(limit); !rb.at.Equal(want) {
			t.Errorf("next holder at the last renewal +%v, want at the server's deadline, +%v", rb.at.Sub(renewed), want.Sub(renewed))
		}
		if rb.lease.Token() <= la.Token() {
			t.Fatalf("next holder's token %d after %d", rb.lease.Token(), la.Token())
		}
		if err := la.Renew(ctx); err == nil {
			t.Fatal("renewal of an expired hold succeeded")
		}
		if _, err := a.Mutex("x", WithHoldLimit(100*time.Millisecond)).TryLock(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("hold limit of 100ms: %v, want ErrInvalidArgument", err)
		}
		lx, err := a.Mutex("x").TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lx.Renew(ctx); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("renewal of a hold without a limit: %v", err)
		}
	})
}

// TestLockSetHoldLimit: a LockSet gives every hold it takes its options:
// with a hold limit the library renews each hold (a waiter waits two
// limits in vain), with WithManualRenewal nothing does and each hold ends
// at its limit (the Lease is lost a margin before, the next holder gets
// it then with a larger token); the owner key is the set's.
func TestLockSetHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		a := newSession(t, cl, WithTTL(time.Minute))
		b := newSession(t, cl)
		const limit = time.Second
		renewed, err := a.LockSet([]string{"set/x", "set/y"}, WithHoldLimit(limit), WithOwnerKey("k")).TryLockAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		taken := time.Now()
		manual, got, err := a.LockSet([]string{"set/p", "set/q"}, WithHoldLimit(limit), WithManualRenewal()).TryLockMany(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("TryLockMany: %v %v", got, err)
		}
		for _, l := range renewed {
			if l.OwnerKey() != "k" {
				t.Fatalf("lease of %s has owner key %q, want the set's", l.Name(), l.OwnerKey())
			}
		}
		info, err := cl.Get(ctx, "set/x")
		if err != nil || len(info.Holders) != 1 || info.Holders[0].HoldLimit != limit || info.Holders[0].OwnerKey != "k" {
			t.Fatalf("set/x: %+v, %v", info, err)
		}

		// Nothing renews p: a's Lease is lost a margin before its limit,
		// b gets it at its limit.
		lostAt := whenLost(manual[0])
		lp, err := b.Mutex("set/p").LockWithin(ctx, 10*limit)
		if err != nil {
			t.Fatalf("b's wait for a hold at its limit: %v", err)
		}
		if d := time.Since(taken); d != limit {
			t.Errorf("b got the hold %v after a took it, want at its limit, %v", d, limit)
		}
		if lp.Token() <= manual[0].Token() {
			t.Fatalf("token %d after the expiry, want > %d", lp.Token(), manual[0].Token())
		}
		if d := (<-lostAt).Sub(taken); d != limit-SafetyMargin(a.TTL()) {
			t.Errorf("a's Lease lost %v after a took the hold, want the limit less the margin, %v", d, limit-SafetyMargin(a.TTL()))
		}
		if err := manual[0].Err(); !errors.Is(err, ErrHoldExpired) {
			t.Fatalf("Err of the expired hold's Lease: %v, want ErrHoldExpired", err)
		}
		// y is renewed: b waits two of its limits in vain.
		if _, err := b.Mutex("set/y").LockWithin(ctx, 2*limit); !errors.Is(err, ErrWaitTimedOut) {
			t.Fatalf("wait of 2 limits for a renewed hold: %v, want ErrWaitTimedOut", err)
		}
		for _, l := range renewed {
			if !l.Valid() {
				t.Fatalf("lease of renewed %s lost: %v", l.Name(), l.Err())
			}
		}
	})
}

// TestHoldLimitRenewsItself: without WithManualRenewal the library renews
// a hold limit while the session is healthy, so the hold outlasts many
// limits; once the client is cut off, the hold comes back at the limit
// after its last renewal (its Lease lost a margin before) although the
// session, with a long TTL, still lives on the server.
func TestHoldLimitRenewsItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		ctx := testCtx(t)
		a := newSession(t, cl, WithTTL(time.Minute))
		b := newSession(t, cl)
		const limit = time.Second
		la, err := a.Mutex("jobs/watched", WithHoldLimit(limit)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// b waits two limits in vain: the hold was renewed meanwhile.
		if _, err := b.Mutex("jobs/watched", WithHoldLimit(limit)).LockWithin(ctx, 2*limit); !errors.Is(err, ErrWaitTimedOut) {
			t.Fatalf("wait of 2 limits for a renewed hold: %v, want ErrWaitTimedOut", err)
		}
		if !la.Valid() {
			t.Fatalf("lease of a renewed hold lost: %v", la.Err())
		}

		// Cut a off: its stream breaks and does not come back.
		entered, _ := pauseReconnect(t)
		lostAt := whenLost(la)
		time.Sleep(limit / 6) // between two renewals
		a.mu.Lock()
		sc := a.stream
		a.mu.Unlock()
		cut := time.Now()
		sc.cancel()
		<-entered
		lb, err := b.Mutex("jobs/watched", WithHoldLimit(limit)).LockWithin(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("the hold of a client cut off did not come back: %v", err)
		}
		// The last renewal was less than a third of the limit before the
		// cut, and the client's deadline and the server's count from it.
		handoff := time.Now()
		lost := <-lostAt
		if d := handoff.Sub(cut); d > limit || d <= limit-limit/3 {
			t.Errorf("the hold came back %v after the cut, want within (2/3, 1] of the limit %v from it", d, limit)
		}
		if d := handoff.Sub(lost); d != SafetyMargin(a.TTL()) {
			t.Errorf("the next holder got the lock %v after the Lease was lost, want the margin, %v", d, SafetyMargin(a.TTL()))
		}
		if !errors.Is(la.Err(), ErrHoldExpired) || lb.Token() <= la.Token() {
			t.Fatalf("lease error %v (want ErrHoldExpired), tokens %d then %d", la.Err(), la.Token(), lb.Token())
		}
		if st := a.State(); st != StateHealthy {
			t.Fatalf("session state %v; the test wants the hold to end before the session", st)
		}
	})
}

// TestHoldLimitRenewedAcrossLeaderChange: the library's renewals follow
// the session to the new leader (LESSONS.md 5: renewal timers that were
// never rescheduled after a failover).
func TestHoldLimitRenewedAcrossLeaderChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		cl := dialCluster(t, c, (lead+1)%3)
		ctx := testCtx(t)
		a := newSession(t, cl, WithTTL(10*time.Second))
		b := newSession(t, cl, WithTTL(10*time.Second))
		const limit = 2 * time.Second
		la, err := a.Mutex("jobs/x", WithHoldLimit(limit)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Stop(lead)
		if c.WaitLeader() == lead {
			t.Fatal("the stopped member still leads")
		}
		if _, err := b.Mutex("jobs/x", WithHoldLimit(limit)).LockWithin(ctx, 3*limit); !errors.Is(err, ErrWaitTimedOut) {
			t.Fatalf("wait of 3 limits after the failover: %v, want ErrWaitTimedOut", err)
		}
		if !la.Valid() {
			t.Fatalf("lease lost across the failover: %v", la.Err())
		}
		info, err := cl.Get(ctx, "jobs/x")
		if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != la.Token() {
			t.Fatalf("holders %+v, %v; want a's hold, token %d", info, err, la.Token())
		}
	})
}
