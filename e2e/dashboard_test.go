package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/batonlock/baton" // moved from the baton package: its names as they were there
	"github.com/batonlock/baton/embed/embedtest"
)

// TestDashboardReadsTheAPI: every JSON field the web dashboard reads is
// there in a live member's answers to the requests the dashboard makes,
// with a lock held and one waiter queued, and the page itself is served.
// The field list is checked against the page's script too, so the two
// cannot drift apart unnoticed in either direction of a rename.
func TestDashboardReadsTheAPI(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	a := newSession(t, cl, WithOwner("dash/a"))
	b := newSession(t, cl, WithOwner("dash/b"))
	old, err := a.Mutex("dash/x", WithOwnerKey("old")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mutex("dash/x", WithOwnerKey("k")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = b.Mutex("dash/x").LockWithin(ctx, time.Minute) }()
	base := "http://" + c.ClientAddr(0)
	getJSON := func(path string) map[string]any {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return m
	}
	embedtest.WaitFor(t, 10*time.Second, "a waiter on dash/x", func() bool {
		l, _ := getJSON("/v1/lock?name=" + url.QueryEscape("dash/x"))["lock"].(map[string]any)
		ws, _ := l["waiters"].([]any)
		return len(ws) == 1
	})

	// has fails unless obj has every field.
	has := func(what string, obj any, fields ...string) {
		t.Helper()
		m, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", what, obj)
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("%s lacks %q: %v", what, f, m)
			}
		}
	}
	first := func(what string, list any) any {
		t.Helper()
		l, ok := list.([]any)
		if !ok || len(l) == 0 {
			t.Fatalf("%s: %v is not a non-empty list", what, list)
		}
		return l[0]
	}
	holder := []string{"session_id", "owner", "owner_key", "token", "count", "since"}
	used := map[string][]string{}
	use := func(group string, fields ...string) []string {
		used[group] = append(used[group], fields...)
		return fields
	}

	st := getJSON("/v1/status")
	has("status", st, use("status", "name", "role", "leader", "leader_id", "leader_addr", "term", "commit_index", "applied_index", "sessions", "locks", "version", "log_version", "members")...)
	has("status member", first("members", st["members"]), use("member", "id", "name", "client_addr", "peer_addr", "learner", "log_version")...)

	locks := getJSON("/v1/locks?page_size=200&prefix=" + url.QueryEscape("dash/"))
	has("locks", locks, use("locks", "locks", "next_page_token")...)
	l := first("locks", locks["locks"])
	has("lock summary", l, use("summary", "name", "holder", "waiters", "holders", "limit")...)
	has("lock summary holder", l.(map[string]any)["holder"], use("holder", holder...)...)

	sessions := getJSON("/v1/sessions?page_size=200")
	has("sessions", sessions, use("sessions", "sessions", "next_after_id")...)
	has("session", first("sessions", sessions["sessions"]), use("session", "id", "owner", "ttl", "holds", "created", "blacklisted")...)

	lock := getJSON("/v1/lock?name=" + url.QueryEscape("dash/x"))
	has("lock", lock, use("lock", "lock", "history")...)
	has("past hold", first("history", lock["history"]), use("past", "session_id", "owner", "owner_key", "token", "since", "ended", "how")...)
	full := lock["lock"].(map[string]any)
	has("lock in full", full, use("full", "holders", "waiters", "limit")...)
	has("holder", first("holders", full["holders"]), append(holder, use("holder", "shared", "hold_limit")...)...)
	has("waiter", first("waiters", full["waiters"]), use("waiter", "session_id", "owner", "owner_key", "since", "wait_timeout", "shared")...)

	js, err := os.ReadFile("../internal/dashboard/static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for group, fields := range used {
		for _, f := range fields {
			if !strings.Contains(string(js), "."+f) {
				t.Errorf("the test checks %s field %q, which app.js does not read: update the list", group, f)
			}
		}
	}

	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), "<title>Baton</title>") {
		t.Fatalf("GET / ended at %s with %s", resp.Request.URL, resp.Status)
	}
}
