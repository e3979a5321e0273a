package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed/embedtest"
)

// feedEvent is one line of a member's dashboard feed (/v1/feed).
type feedEvent struct {
	Hello *struct {
		Member       string `json:"member"`
		You          string `json:"you"`
		MayBlacklist bool   `json:"may_blacklist"`
		MayRelease   bool   `json:"may_release"`
	} `json:"hello"`
	Rates *struct {
		Through int64 `json:"through"`
		Seconds []struct {
			Second int64  `json:"second"`
			Grants uint64 `json:"grants"`
		} `json:"seconds"`
	} `json:"rates"`
	Changed *struct {
		AppliedIndex uint64 `json:"applied_index"`
		LeaderID     uint64 `json:"leader_id"`
	} `json:"changed"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// openFeed connects to addr's feed with token (if any) and returns its
// events as they come; the connection ends with the test.
func openFeed(t *testing.T, addr, token string) (status int, body string, events <-chan feedEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/feed", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), nil
	}
	ch := make(chan feedEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e feedEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("feed line %q: %v", sc.Text(), err)
				return
			}
			select {
			case ch <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return resp.StatusCode, "", ch
}

// nextEvent waits up to within for an event for which ok is true.
func nextEvent(t *testing.T, events <-chan feedEvent, within time.Duration, what string, ok func(feedEvent) bool) feedEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e, open := <-events:
			if !open {
				t.Fatalf("the feed ended before %s", what)
			}
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s on the feed within %v", what, within)
		}
	}
}

// post sends a state-changing request as a browser would, from origin
// site (Sec-Fetch-Site), with token (if any).
func browserPost(t *testing.T, addr, path, site, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if site != "" {
		req.Header.Set("Sec-Fetch-Site", site)
		if site == "cross-site" {
			req.Header.Set("Origin", "http://elsewhere.example")
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDashboardFeed: the feed says hello (with authentication off anyone
// may act), then the recent rates, then a changed event once something
// applies and that second's grant in the rates. A blacklist posted by a
// browser from another site is refused as cross-site request forgery and
// changes nothing; the same post from the member's own page is made.
func TestDashboardFeed(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	addr := c.ClientAddr(0)
	_, _, events := openFeed(t, addr, "")
	hello := nextEvent(t, events, 5*time.Second, "hello", func(e feedEvent) bool { return e.Hello != nil })
	if !hello.Hello.MayBlacklist || !hello.Hello.MayRelease || hello.Hello.You != "" {
		t.Errorf("hello with authentication off: %+v, want anyone to act", *hello.Hello)
	}
	nextEvent(t, events, 5*time.Second, "rates", func(e feedEvent) bool { return e.Rates != nil })
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\nbaton_dashboard_feeds 1\n") {
		t.Errorf("/metrics does not count the one feed open as baton_dashboard_feeds 1")
	}

	s := newSession(t, cl, baton.WithOwner("feed/a"))
	if _, err := s.Mutex("feed/x").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, events, 5*time.Second, "changed event", func(e feedEvent) bool { return e.Changed != nil && e.Changed.AppliedIndex > 0 })
	nextEvent(t, events, 5*time.Second, "a second with a grant", func(e feedEvent) bool {
		if e.Rates == nil {
			return false
		}
		for _, r := range e.Rates.Seconds {
			if r.Grants > 0 {
				return true
			}
		}
		return false
	})

	path := "/v1/sessions/" + strconv.FormatUint(s.ID(), 10) + "/blacklist"
	if code, body := browserPost(t, addr, path, "cross-site", ""); code != http.StatusForbidden || !strings.Contains(body, "cross-site request forgery") {
		t.Errorf("cross-site blacklist: %d %s, want 403 naming cross-site request forgery", code, body)
	}
	blacklisted := func() bool {
		infos, err := cl.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if i.ID == s.ID() {
				return i.Blacklisted
			}
		}
		return false
	}
	if blacklisted() {
		t.Fatal("a refused cross-site blacklist blacklisted the session")
	}
	if code, body := browserPost(t, addr, path, "same-origin", ""); code != http.StatusOK {
		t.Fatalf("same-origin blacklist: %d %s", code, body)
	}
	if !blacklisted() {
		t.Error("the same-origin blacklist did not blacklist the session")
	}
}

// TestDashboardFeedAuth: with authentication on, the feed needs a
// credential; its hello says what the user may do (alice locks and reads
// under jobs/: no blacklist, no release; root: both), and a blacklist
// alice posts from the page is refused by the member as any call of hers.
func TestDashboardFeedAuth(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rootTok, err := cl.AddUser(ctx, "root", true)
	must(err)
	must(cl.GrantRole(ctx, "root", "root"))
	must(cl.AddRole(ctx, "jobs"))
	must(cl.Grant(ctx, "jobs", "jobs/", "lock,read"))
	aliceTok, err := cl.AddUser(ctx, "alice", true)
	must(err)
	must(cl.GrantRole(ctx, "alice", "jobs"))
	must(cl.EnableAuth(ctx))
	addr := c.ClientAddr(0)

	if code, body, _ := openFeed(t, addr, ""); code != http.StatusUnauthorized || !strings.Contains(body, "bearer token") {
		t.Errorf("feed without a credential: %d %s, want 401 asking for one", code, body)
	}
	for _, tt := range []struct {
		user, token string
		may         bool
	}{{"alice", aliceTok, false}, {"root", rootTok, true}} {
		_, _, events := openFeed(t, addr, tt.token)
		h := nextEvent(t, events, 5*time.Second, "hello", func(e feedEvent) bool { return e.Hello != nil }).Hello
		if h.You != tt.user || h.MayBlacklist != tt.may || h.MayRelease != tt.may {
			t.Errorf("%s's hello: %+v, want you=%s and may act %v", tt.user, *h, tt.user, tt.may)
		}
	}
	root := dial(t, addr, baton.WithToken(rootTok))
	s := newSession(t, root)
	path := "/v1/sessions/" + strconv.FormatUint(s.ID(), 10) + "/blacklist"
	if code, body := browserPost(t, addr, path, "same-origin", aliceTok); code != http.StatusForbidden || !strings.Contains(body, "alice") {
		t.Errorf("alice's blacklist from the page: %d %s, want 403 naming her", code, body)
	}
	if code, body := browserPost(t, addr, path, "same-origin", rootTok); code != http.StatusOK {
		t.Errorf("root's blacklist from the page: %d %s", code, body)
	}
}

// TestDashboardFeedFollowsTheLeader: a follower's feed says when the
// leadership moves (a changed event with the new leader, so the page
// reads the cluster again), and ends with an error, which makes the page
// connect again, when its member is left without a leader.
func TestDashboardFeedFollowsTheLeader(t *testing.T) {
	skipShort(t)
	c := embedtest.New(t, 3)
	lead := c.WaitLeader()
	f := (lead + 1) % c.Len()
	other := 3 - lead - f
	ctx := testCtx(t)
	_, _, events := openFeed(t, c.ClientAddr(f), "")
	nextEvent(t, events, 5*time.Second, "rates", func(e feedEvent) bool { return e.Rates != nil })

	cl := dial(t, c.Endpoints(lead))
	if _, err := cl.TransferLeadership(ctx, c.Config(other).Name); err != nil {
		t.Fatal(err)
	}
	want := c.Member(other).Status().ID
	nextEvent(t, events, 10*time.Second, "the new leader", func(e feedEvent) bool { return e.Changed != nil && e.Changed.LeaderID == want })

	c.Stop(lead)
	c.Stop(other)
	e := nextEvent(t, events, 20*time.Second, "the feed's end", func(e feedEvent) bool { return e.Error != nil })
	if !strings.Contains(e.Error.Message, "knows no leader") {
		t.Errorf("the feed ended with %q, want it to say its member knows no leader", e.Error.Message)
	}
}
