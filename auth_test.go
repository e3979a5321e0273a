package baton

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// authCluster is a single member with authentication on: a user root
// (role root) and a user alice whose role jobs may lock and read under
// jobs/. It returns the member's address and the two users' tokens.
// opts configure the member.
func authCluster(t *testing.T, opts ...embedtest.Option) (addr, rootTok, aliceTok string, admin *Client) {
	t.Helper()
	c, cl := single(t, opts...)
	ctx := testCtx(t)
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rootTok, err = cl.AddUser(ctx, "root", true)
	must(err)
	must(cl.GrantRole(ctx, "root", "root"))
	must(cl.AddRole(ctx, "jobs"))
	must(cl.Grant(ctx, "jobs", "jobs/", "lock,read"))
	aliceTok, err = cl.AddUser(ctx, "alice", true)
	must(err)
	must(cl.GrantRole(ctx, "alice", "jobs"))
	must(cl.EnableAuth(ctx))
	addr = c.ClientAddr(0)
	return addr, rootTok, aliceTok, dial(t, addr, WithToken(rootTok))
}

// TestAuthPermissions: with authentication on, a call without a
// credential the cluster knows is UNAUTHENTICATED; a user whose role may
// lock and read under jobs/ can do that and nothing else (no other
// prefix, no blacklist, no auth change, no listing of everything); a
// revoked permission takes effect at the next call; root sees the audit.
func TestAuthPermissions(t *testing.T) {
	addr, rootTok, aliceTok, root := authCluster(t)
	ctx := testCtx(t)

	// Dial reads the members (Status), which needs a user too: the
	// cluster's addresses and size are not for strangers.
	for what, opts := range map[string][]Option{
		"no credential": {WithMaxAttempts(1)},
		"a wrong token": {WithToken("not-a-token-of-anyone"), WithMaxAttempts(1)},
	} {
		if cl, err := Dial(ctx, addr, opts...); !errors.Is(err, ErrUnauthenticated) {
			if err == nil {
				cl.Close()
			}
			t.Errorf("%s: Dial: %v, want ErrUnauthenticated", what, err)
		}
	}
	for _, tt := range []struct{ method, path, token string }{
		{http.MethodGet, "/v1/status", ""},
		{http.MethodGet, "/v1/status", "not-a-token-of-anyone"},
		{http.MethodPost, "/v1/sessions", ""},
	} {
		req, _ := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(`{"ttl": "10s"}`))
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with token %q: %s, want 401", tt.method, tt.path, tt.token, resp.Status)
		}
	}

	alice := dial(t, addr, WithToken(aliceTok))
	s := newSession(t, alice)
	lease, err := s.Mutex("jobs/1").Lock(ctx)
	if err != nil {
		t.Fatalf("alice's lock under jobs/: %v", err)
	}
	denied := func(what string, err error, names string) {
		t.Helper()
		if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), names) {
			t.Errorf("%s: %v, want ErrPermissionDenied naming %s", what, err, names)
		}
	}
	_, err = s.Mutex("billing/x").TryLock(ctx)
	denied("alice's lock of billing/x", err, `"billing/x"`)
	_, err = s.TryLockAll(ctx, "jobs/2", "billing/y")
	denied("alice's lock of jobs/2 and billing/y", err, `"billing/y"`)
	denied("alice's blacklist", alice.Blacklist(ctx, s.ID()), "admin")
	denied("alice's cas-release", alice.CasRelease(ctx, "jobs/1", s.ID(), lease.Token()), "admin")
	_, err = alice.AddUser(ctx, "mallory", true)
	denied("alice adding a user", err, "admin")
	_, err = alice.Get(ctx, "billing/x")
	denied("alice's read of billing/x", err, `"billing/x"`)
	_, err = alice.List(ctx, "")
	denied("alice's list of every lock", err, "read")
	_, err = alice.Sessions(ctx)
	denied("alice's list of sessions", err, "read")
	if _, err := alice.List(ctx, "jobs/"); err != nil {
		t.Errorf("alice's list of jobs/: %v", err)
	}
	if info, err := alice.Get(ctx, "jobs/1"); err != nil || len(info.Holders) != 1 {
		t.Errorf("alice's read of jobs/1: %+v %v", info, err)
	}

	// A session is its user's: root, even with its secret, cannot act for
	// alice's session.
	body := fmt.Sprintf(`{"header": {"session_id": %d, "seq": 1000, "secret": %q}, "name": "jobs/9"}`, s.ID(), s.Secret())
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/locks/acquire", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rootTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("root acting for alice's session over HTTP: %s, want 403", resp.Status)
	}
	// Over HTTP, no credential is 401.
	resp, err = http.Get("http://" + addr + "/v1/lock?name=jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a read over HTTP without a credential: %s, want 401", resp.Status)
	}

	// A revoked permission takes effect at once.
	if err := root.Revoke(ctx, "jobs", "jobs/"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Mutex("jobs/2").TryLock(ctx)
	denied("alice's lock after the revocation", err, `"jobs/2"`)
	_, err = alice.Get(ctx, "jobs/1")
	denied("alice's read after the revocation", err, `"jobs/1"`)
	// What she holds she may still release.
	if err := lease.Release(ctx); err != nil {
		t.Errorf("alice's release after the revocation: %v", err)
	}

	audit, err := root.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range audit {
		lines = append(lines, e.Principal+": "+e.Action)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{`: enabled authentication`, `: added user "alice" (with a token)`, `root: took role "jobs"'s permissions over "jobs/"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the audit lacks %q:\n%s", want, got)
		}
	}
	st, err := root.GetAuth(ctx)
	if err != nil || !st.Enabled || st.You != "root" || len(st.Users) != 2 {
		t.Errorf("GetAuth: %+v %v", st, err)
	}
}

// TestMaxSessionsPerUser: with authentication on and 3 sessions a user,
// alice's fourth open is refused (RESOURCE_EXHAUSTED, TOO_MANY_SESSIONS,
// HTTP 429, naming her and the flag) while bob, a user like her, and
// root still open; one of her sessions closed gives her a place again
// (issue 23: sessions bounded "in total and per principal").
func TestMaxSessionsPerUser(t *testing.T) {
	const limit = 3
	addr, _, aliceTok, root := authCluster(t, embedtest.Configure(func(_ int, c *embed.Config) { c.MaxSessionsPerUser = limit }))
	ctx := testCtx(t)
	bobTok, err := root.AddUser(ctx, "bob", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.GrantRole(ctx, "bob", "jobs"); err != nil {
		t.Fatal(err)
	}
	alice := dial(t, addr, WithToken(aliceTok))
	var hers []*Session
	for range limit {
		hers = append(hers, newSession(t, alice))
	}

	_, err = alice.NewSession(ctx)
	if !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), `user "alice"`) || !strings.Contains(err.Error(), "--max-sessions-per-user") {
		t.Fatalf("alice's open over %d sessions: %v, want ErrTooManySessions naming her and --max-sessions-per-user", limit, err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/sessions", strings.NewReader(`{"ttl":"60s"}`))
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("alice's open over HTTP over the limit: %s, want 429", resp.Status)
	}

	newSession(t, dial(t, addr, WithToken(bobTok)))
	newSession(t, root)

	if err := hers[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	newSession(t, alice)
}

// TestAuthCallsCheckNames: the client's auth calls refuse names the
// server would, before they send anything (the member is stopped: a call
// that were sent would be UNAVAILABLE).
func TestAuthCallsCheckNames(t *testing.T) {
	c := startCluster(t, 1)
	cl := dial(t, c.Endpoints(0), WithMaxAttempts(1))
	c.Stop(0)
	ctx := testCtx(t)
	for what, err := range map[string]error{
		"a user with a newline":     func() error { _, err := cl.AddUser(ctx, "a\nb", false); return err }(),
		"an empty user":             func() error { _, err := cl.AddUser(ctx, "", true); return err }(),
		"a role of 200 bytes":       cl.AddRole(ctx, strings.Repeat("r", 200)),
		"a prefix that is no UTF-8": cl.Grant(ctx, "jobs", "\xff", "lock"),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
}
