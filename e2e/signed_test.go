package e2e

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/fence"
)

// signedTokens starts every member with signed tokens.
var signedTokens = embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.SignedTokens = true })

// waitKeys waits for the cluster's first signing key, which its leader
// proposes once it leads, and returns the key set a resource would fetch
// from member i.
func waitKeys(t *testing.T, c *embedtest.Cluster, i int) fence.KeySet {
	t.Helper()
	var ks fence.KeySet
	embedtest.WaitFor(t, 10*time.Second, "the cluster's first signing key", func() bool {
		var err error
		ks, err = fence.FetchKeys(testCtx(t), nil, "http://"+c.ClientAddr(i))
		return err == nil
	})
	return ks
}

// verify checks that l's signed token verifies with ks now and says what
// l is: its lock, token, session, mode and hold limit.
func verify(t *testing.T, ks fence.KeySet, l *baton.Lease, mode fence.Mode, holdLimit time.Duration) fence.Claims {
	t.Helper()
	if l.SignedToken() == "" {
		t.Fatalf("lease of %s (token %d) has no signed token", l.Name(), l.Token())
	}
	c, err := ks.Verify(l.SignedToken(), time.Now())
	if err != nil {
		t.Fatalf("signed token of %s: %v", l.Name(), err)
	}
	want := fence.Claims{KeyID: c.KeyID, Lock: l.Name(), Token: l.Token(), Session: l.Session().ID(), Mode: mode, Issued: c.Issued, HoldLimit: holdLimit}
	if c != want {
		t.Fatalf("signed token says %+v, want %+v", c, want)
	}
	if d := time.Since(c.Issued); d < 0 || d > time.Minute {
		t.Fatalf("signed token issued at %v, %v from now", c.Issued, d)
	}
	return c
}

// TestSignedTokens: a member with signed tokens makes the cluster's first
// key, and every grant it answers carries a token that verifies with the
// keys of GET /v1/keys alone: a mutex's, a semaphore permit's (shared), a
// limited hold's, a set's, a unary acquire's (HTTP/JSON too), and a grant
// pushed to a waiter after a release, with a higher fencing token.
func TestSignedTokens(t *testing.T) {
	c, cl := single(t, signedTokens)
	ks := waitKeys(t, c, 0)
	if len(ks) != 1 || !ks[0].NotAfter.IsZero() {
		t.Fatalf("keys %+v, want one current key", ks)
	}
	ctx := testCtx(t)
	s := newSession(t, cl)

	l, err := s.Mutex("signed/mutex").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if claims := verify(t, ks, l, fence.Exclusive, 0); claims.KeyID != ks[0].ID {
		t.Fatalf("signed by key %d, the cluster's is %d", claims.KeyID, ks[0].ID)
	}
	p, err := s.Semaphore("signed/pool", 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, ks, p, fence.Shared, 0)
	limited, err := s.Mutex("signed/limited", baton.WithHoldLimit(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, ks, limited, fence.Exclusive, time.Minute)
	set, err := s.LockAll(ctx, "signed/set/1", "signed/set/2")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range set {
		verify(t, ks, l, fence.Exclusive, 0)
	}

	// A waiter's grant comes as a push after the holder's release.
	other := newSession(t, cl)
	got := make(chan *baton.Lease, 1)
	go func() {
		l, err := other.Mutex("signed/mutex").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	embedtest.WaitFor(t, 10*time.Second, "the second session to queue", func() bool {
		info, err := cl.Get(ctx, "signed/mutex")
		return err == nil && len(info.Waiters) == 1
	})
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	if claims := verify(t, ks, next, fence.Exclusive, 0); claims.Token <= l.Token() {
		t.Fatalf("the waiter's signed token has token %d, the released hold had %d", claims.Token, l.Token())
	}

	// A unary acquire (gRPC) is signed too.
	bc := c.Client(0)
	open, err := bc.OpenSession(ctx, &batonpb.OpenSessionRequest{Owner: "unary"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := bc.Acquire(ctx, &batonpb.AcquireRequest{Name: "signed/unary", Shared: true, Limit: 3,
		Header: &batonpb.RequestHeader{SessionId: open.GetSessionId(), Seq: 1, Secret: open.GetSecret()}})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := ks.Verify(resp.GetSignedToken(), time.Now())
	if err != nil {
		t.Fatalf("unary acquire's signed token: %v", err)
	}
	if claims.Lock != "signed/unary" || claims.Token != resp.GetToken() || claims.Session != open.GetSessionId() || claims.Mode != fence.Shared {
		t.Fatalf("unary acquire's signed token says %+v, answer %v", claims, resp)
	}
}

// TestSignedTokenThroughMiddleware: a resource behind
// fence.SignedMiddleware, with keys fetched from a real member once,
// serves a real grant's signed token and refuses it altered in any byte
// (403, or 400 when the alteration breaks its form), and refuses a
// holder's token once a later holder's was seen (409).
func TestSignedTokenThroughMiddleware(t *testing.T) {
	c, cl := single(t, signedTokens)
	ks := waitKeys(t, c, 0)
	ctx := testCtx(t)
	var served []fence.Claims
	fenced := fence.SignedMiddleware(fence.NewGuard(16), func() fence.KeySet { return ks }, fence.RefuseUnfenced)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sc, _ := fence.SignedClaimsFrom(r.Context())
			served = append(served, sc)
		}))
	srv := httptest.NewServer(fenced)
	t.Cleanup(srv.Close)
	send := func(token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(fence.SignedTokenHeader, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	s := newSession(t, cl)
	l, err := s.Mutex("stock/row-7").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code := send(l.SignedToken()); code != http.StatusOK || len(served) != 1 || served[0].Token != l.Token() {
		t.Fatalf("a real signed token: %d, served %+v", code, served)
	}
	// Each character altered in its top bit, which always carries data
	// (the low bits of the last one may be padding, which decoding
	// ignores).
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	tok := []byte(l.SignedToken())
	for i := range tok {
		altered := slices.Clone(tok)
		altered[i] = alphabet[strings.IndexByte(alphabet, tok[i])^32]
		if code := send(string(altered)); code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Fatalf("the signed token altered at byte %d was answered %d", i, code)
		}
	}
	if len(served) != 1 {
		t.Fatalf("altered tokens were served: %+v", served[1:])
	}

	// The next holder's token is served; the first holder's no longer.
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Mutex("stock/row-7").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code := send(l2.SignedToken()); code != http.StatusOK {
		t.Fatalf("the next holder's token: %d", code)
	}
	if code := send(l.SignedToken()); code != http.StatusConflict {
		t.Fatalf("the first holder's token after the next's: %d, want 409", code)
	}
}

// TestSigningKeyRotation: after a rotation, grants are signed by the new
// key; a token of the key rotated out still verifies with the keys
// fetched after the rotation until its retention ends, and not after.
// The keys and the rotation survive a restart (from a snapshot and the
// log after it), and every member serves the same keys after a leader
// change, whose new leader signs with the same current key.
func TestSigningKeyRotation(t *testing.T) {
	skipShort(t)
	c := embedtest.New(t, 3, signedTokens, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.SnapshotEntries = 8 }))
	lead := c.WaitLeader()
	cl := dial(t, c.Endpoints(lead))
	before := waitKeys(t, c, lead)
	ctx := testCtx(t)
	s := newSession(t, cl)
	old, err := s.Mutex("rot/a").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const retention = time.Hour
	cur, keys, err := cl.RotateSigningKey(ctx, retention)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !cur.Current || keys[0].ID != before[0].ID || keys[0].Current {
		t.Fatalf("after the rotation: current %+v, keys %+v", cur, keys)
	}
	after, err := fence.FetchKeys(ctx, nil, "http://"+c.ClientAddr(lead))
	if err != nil {
		t.Fatal(err)
	}
	retired := after[0]
	if retired.ID != before[0].ID || retired.NotAfter.IsZero() || !retired.Public.Equal(before[0].Public) {
		t.Fatalf("the retired key %+v; before the rotation %+v", retired, before[0])
	}
	if d := time.Until(retired.NotAfter); d < retention-time.Minute || d > retention {
		t.Fatalf("the retired key verifies for %v more, want about %v", d, retention)
	}
	claims, err := after.Verify(old.SignedToken(), time.Now())
	if err != nil || claims.KeyID != retired.ID {
		t.Fatalf("the old key's token with the keys after the rotation: %+v, %v", claims, err)
	}
	if _, err := after.Verify(old.SignedToken(), retired.NotAfter.Add(-time.Second)); err != nil {
		t.Fatalf("a second before its retention ends: %v", err)
	}
	if _, err := after.Verify(old.SignedToken(), retired.NotAfter); !errors.Is(err, fence.ErrKeyRetired) {
		t.Fatalf("when its retention ends: %v, want ErrKeyRetired", err)
	}
	fresh, err := s.Mutex("rot/b").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := verify(t, after, fresh, fence.Exclusive, 0); c.KeyID != cur.ID {
		t.Fatalf("a grant after the rotation is signed by key %d, the current is %d", c.KeyID, cur.ID)
	}

	// Enough entries for snapshots, then every member restarts.
	for i := range 12 {
		l, err := s.Mutex("rot/churn").Lock(ctx)
		if err != nil {
			t.Fatalf("churn %d: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.Len() {
		c.Stop(i)
	}
	for i := range c.Len() {
		c.Start(i)
	}
	lead = c.WaitLeader()
	for i := range c.Len() {
		ks := waitKeys(t, c, i)
		if !sameKeys(ks, after) {
			t.Fatalf("member %d after the restart serves %+v, before it %+v", i, ks, after)
		}
	}

	// A leader change: the others serve the same keys, and the new
	// leader signs with the current one.
	c.Stop(lead)
	next := c.WaitLeader()
	for _, i := range c.Running() {
		ks, err := fence.FetchKeys(ctx, nil, "http://"+c.ClientAddr(i))
		if err != nil || !sameKeys(ks, after) {
			t.Fatalf("member %d after the leader change: %+v, %v", i, ks, err)
		}
	}
	cl2 := dial(t, c.Endpoints(next))
	s2 := newSession(t, cl2)
	l, err := s2.Mutex("rot/c").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := verify(t, after, l, fence.Exclusive, 0); c.KeyID != cur.ID {
		t.Fatalf("the new leader signs with key %d, the current is %d", c.KeyID, cur.ID)
	}
}

func sameKeys(a, b fence.KeySet) bool {
	return slices.EqualFunc(a, b, func(x, y fence.PublicKey) bool {
		return x.ID == y.ID && x.Public.Equal(y.Public) && x.NotAfter.Equal(y.NotAfter)
	})
}

// TestUnsignedByDefault: a member started without signed tokens makes no
// key and signs nothing.
func TestUnsignedByDefault(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl)
	l, err := s.Mutex("plain").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.SignedToken() != "" {
		t.Fatalf("a member without signed tokens signed %q", l.SignedToken())
	}
	keys, err := cl.Keys(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys %+v, %v; want none", keys, err)
	}
	if _, err := fence.FetchKeys(ctx, nil, "http://"+c.ClientAddr(0)); err == nil {
		t.Fatal("FetchKeys found keys on a cluster without any")
	}
}

// TestCLISignedTokens: baton lock gives its child the grant's signed
// token (BATON_SIGNED_TOKEN), which verifies with the cluster's keys;
// baton keys lists them and baton keys rotate retires the current one.
func TestCLISignedTokens(t *testing.T) {
	c, cl := single(t, signedTokens)
	ks := waitKeys(t, c, 0)
	ep := c.Endpoints(0)
	p := startLock(t, ep, "cli/signed", "--", "sh", "-c", `echo "$BATON_TOKEN $BATON_SIGNED_TOKEN"`)
	fields := strings.Fields(p.line(t, 10*time.Second))
	if len(fields) != 2 {
		t.Fatalf("the child saw %q, want a token and a signed token", fields)
	}
	claims, err := ks.Verify(fields[1], time.Now())
	if err != nil || claims.Lock != "cli/signed" || strconv.FormatUint(claims.Token, 10) != fields[0] {
		t.Fatalf("BATON_SIGNED_TOKEN says %+v (%v); BATON_TOKEN is %s", claims, err, fields[0])
	}
	if code := p.exit(t, 10*time.Second); code != 0 {
		t.Fatalf("baton lock exited %d", code)
	}

	run := func(args ...string) string {
		cmd := exec.Command(batonBinary(t), args...)
		cmd.Env = append(os.Environ(), "BATON_ENDPOINTS="+ep)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("baton %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	id := strconv.FormatUint(ks[0].ID, 10)
	if out := run("keys"); !strings.Contains(out, id) || !strings.Contains(out, "current") {
		t.Fatalf("baton keys:\n%s", out)
	}
	if out := run("keys", "rotate", "--retention", "1h"); !strings.Contains(out, "verifies for 1h0m0s") {
		t.Fatalf("baton keys rotate:\n%s", out)
	}
	keys, err := cl.Keys(testCtx(t))
	if err != nil || len(keys) != 2 || keys[0].ID != ks[0].ID || keys[0].Current {
		t.Fatalf("after baton keys rotate: %+v, %v", keys, err)
	}
	if out := run("keys"); !strings.Contains(out, "retired, verifies until") {
		t.Fatalf("baton keys after a rotation:\n%s", out)
	}
}
