package baton

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// nextLeader waits for the next event of an Observe.
func nextLeader(t *testing.T, ch <-chan Leader) Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("observe channel closed")
		}
		return l
	case <-time.After(15 * time.Second):
		t.Fatal("no leader event within 15s")
	}
	return Leader{}
}

// TestElection: candidates lead in the order they campaigned, each with
// its value and a larger term; a leader proclaims a new value and keeps
// its term; an observer sees every change in order, the vacancy too; bad
// input and a proclaim by a non-leader are refused and change nothing.
func TestElection(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b, o := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b")), newSession(t, cl, WithOwner("observer"))
	const name = "leader/scheduler"
	ea, eb, eo := a.Election(name), b.Election(name), o.Election(name)
	observer := cl.Election(name) // no session
	if _, err := observer.Campaign(ctx, "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Campaign on an observer's handle: %v, want ErrInvalidArgument", err)
	}
	if err := observer.Proclaim(ctx, "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Proclaim on an observer's handle: %v, want ErrInvalidArgument", err)
	}

	if _, err := eo.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader of an empty election: %v, want ErrNoLeader", err)
	}
	obs, err := observer.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != 0 || l.Index == 0 {
		t.Fatalf("first event of an empty election: %+v", l)
	}

	la, err := ea.Campaign(ctx, "10.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != la.Token() || l.Value != "10.0.0.1:80" || l.SessionID != a.ID() || l.Owner != "a" {
		t.Fatalf("event after a won: %+v (term %d)", l, la.Token())
	}
	if _, err := ea.Campaign(ctx, "again"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a second Campaign of a leader: %v, want ErrInvalidArgument", err)
	}

	bch := make(chan lockResult, 1)
	go func() {
		l, err := eb.Campaign(ctx, "10.0.0.2:80")
		bch <- lockResult{lease: l, err: err}
	}()
	if err := eb.Proclaim(ctx, "usurper"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Proclaim by a candidate that does not lead: %v, want ErrNotHeld", err)
	}
	// The server refuses a proclaim of a's hold by b too (the handle
	// above refused it before sending).
	req := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Proclaim{Proclaim: &batonpb.ProclaimRequest{Name: name, Token: la.Token(), Value: "usurper"}}}
	if _, err := b.do(ctx, req, nil); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("b's proclaim of a's hold: %v, want ErrNotHeld", err)
	}
	for _, bad := range []string{strings.Repeat("v", rules.MaxHoldValueLen+1), "two\nlines", "\xff"} {
		if err := ea.Proclaim(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Proclaim(%q): %v, want ErrInvalidArgument", bad, err)
		}
		if _, err := eb.Campaign(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Campaign(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	if l, err := eo.Leader(ctx); err != nil || l.Value != "10.0.0.1:80" || l.Term != la.Token() {
		t.Fatalf("Leader after refused proclaims: %+v, %v", l, err)
	}

	if err := ea.Proclaim(ctx, "10.0.0.1:81"); err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != la.Token() || l.Value != "10.0.0.1:81" {
		t.Fatalf("event after a proclaimed: %+v (term %d)", l, la.Token())
	}
	if l, err := eo.Leader(ctx); err != nil || l.Value != "10.0.0.1:81" || l.Term != la.Token() {
		t.Fatalf("Leader after a proclaimed: %+v, %v", l, err)
	}

	if err := ea.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ea.Proclaim(ctx, "gone"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Proclaim after Resign: %v, want ErrNotHeld", err)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("a's leadership is not lost after Resign")
	}
	rb := recv(t, bch)
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if rb.lease.Token() <= la.Token() {
		t.Fatalf("b's term %d is not above a's %d", rb.lease.Token(), la.Token())
	}
	if l := nextLeader(t, obs); l.Term != rb.lease.Token() || l.Value != "10.0.0.2:80" || l.SessionID != b.ID() {
		t.Fatalf("event after b won: %+v (term %d)", l, rb.lease.Token())
	}

	// The leader's session ends: the election has no leader.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l := nextLeader(t, obs); l.Term != 0 {
		t.Fatalf("event after b's session closed: %+v", l)
	}
	if _, err := eo.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after the leader's session closed: %v, want ErrNoLeader", err)
	}
	if err := ea.Resign(ctx); err != nil {
		t.Fatalf("Resign without leading: %v", err)
	}
	if _, err := observer.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("an observer's Leader after the leader's session closed: %v, want ErrNoLeader", err)
	}
}

// TestElectionValueOverHTTP: curl takes a hold with a value and proclaims
// a new one; a value too long is refused with 400 naming the bound, and a
// proclaim by a session that does not hold the lock with 400 (failed
// precondition), changing nothing.
func TestElectionValueOverHTTP(t *testing.T) {
	c, cl := single(t)
	newSession(t, cl) // the member leads
	ctx := testCtx(t)
	base := "http://" + c.ClientAddr(0)
	post := func(path, body string, out any) (int, string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s: %s: %v", path, b, err)
			}
		}
		return resp.StatusCode, string(b)
	}
	var opened struct {
		SessionID string `json:"session_id"`
		Secret    string `json:"secret"`
	}
	if code, body := post("/v1/sessions", `{"owner": "curl"}`, &opened); code != http.StatusOK {
		t.Fatalf("open: %d %s", code, body)
	}
	header := func(seq int) string {
		return fmt.Sprintf(`"header": {"session_id": %q, "seq": "%d", "secret": %q}`, opened.SessionID, seq, opened.Secret)
	}
	var got struct {
		Token string `json:"token"`
	}
	if code, body := post("/v1/locks/acquire", `{`+header(1)+`, "name": "leader/http", "value": "10.0.0.9:80"}`, &got); code != http.StatusOK {
		t.Fatalf("acquire with a value: %d %s", code, body)
	}
	if code, body := post("/v1/locks/acquire", `{`+header(2)+`, "name": "leader/other", "value": "`+strings.Repeat("v", rules.MaxHoldValueLen+1)+`"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "MaxHoldValueLen") {
		t.Fatalf("acquire with a value too long: %d %s", code, body)
	}
	if code, body := post("/v1/locks/proclaim", `{`+header(3)+`, "name": "leader/http", "token": "`+got.Token+`", "value": "10.0.0.9:81"}`, nil); code != http.StatusOK {
		t.Fatalf("proclaim: %d %s", code, body)
	}
	if code, body := post("/v1/locks/proclaim", `{`+header(4)+`, "name": "leader/http", "token": "1", "value": "stale"}`, nil); code != http.StatusBadRequest || !strings.Contains(body, "TOKEN_MISMATCH") {
		t.Fatalf("proclaim with another token: %d %s", code, body)
	}
	info, err := cl.Get(ctx, "leader/http")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Value != "10.0.0.9:81" {
		t.Fatalf("Get after the proclaims: %+v, %v", info, err)
	}
	if info, err := cl.Get(ctx, "leader/other"); err != nil || len(info.Holders) != 0 {
		t.Fatalf("the refused acquire took a hold: %+v, %v", info, err)
	}
}
