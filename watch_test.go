package baton

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// nextEvent waits for the next event of a watch.
func nextEvent(t *testing.T, ch <-chan LockEvent) LockEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no watch event within 15s")
	}
	return LockEvent{}
}

// eventWhere reads events until cond holds, checking that their index
// only grows.
func eventWhere(t *testing.T, ch <-chan LockEvent, last uint64, what string, cond func(LockEvent) bool) LockEvent {
	t.Helper()
	for {
		ev := nextEvent(t, ch)
		if ev.Index <= last {
			t.Fatalf("event at index %d after %d", ev.Index, last)
		}
		last = ev.Index
		if cond(ev) {
			return ev
		}
		t.Logf("passing event at %d (waiting for %s): %+v", ev.Index, what, ev.Lock)
	}
}

func TestWatch(t *testing.T) {
	_, cl := single(t)
	ctx := testCtx(t)
	a, b := newSession(t, cl, WithOwner("a")), newSession(t, cl, WithOwner("b"))

	if _, err := cl.Watch(ctx, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Watch of an empty name: %v, want ErrInvalidArgument", err)
	}
	wctx, stop := context.WithCancel(ctx)
	ch, err := cl.Watch(wctx, "leader/jobs")
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, ch)
	if ev.Holder() != nil || ev.Index == 0 {
		t.Fatalf("first event of a free lock: %+v", ev)
	}

	la, err := a.Mutex("leader/jobs").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev = eventWhere(t, ch, ev.Index, "a to lead", func(ev LockEvent) bool { return ev.Holder() != nil })
	if h := ev.Holder(); h.SessionID != a.ID() || h.Token != la.Token() || ev.Index < la.Token() {
		t.Fatalf("event after a's acquire: %+v (token %d)", ev, la.Token())
	}
	bch := lockAsync(ctx, b.Mutex("leader/jobs"))
	ev = eventWhere(t, ch, ev.Index, "b to queue", func(ev LockEvent) bool { return len(ev.Lock.Waiters) == 1 })
	if ev.Lock.Waiters[0].SessionID != b.ID() || ev.Holder().SessionID != a.ID() {
		t.Fatalf("event after b queued: %+v", ev)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := recv(t, bch)
	if lb.err != nil {
		t.Fatal(lb.err)
	}
	ev = eventWhere(t, ch, ev.Index, "b to lead", func(ev LockEvent) bool { return ev.Holder() != nil && ev.Holder().SessionID == b.ID() })
	if ev.Holder().Token != lb.lease.Token() || len(ev.Lock.Waiters) != 0 {
		t.Fatalf("event after the handoff: %+v", ev)
	}
	// A session's end is a change too, though its command names no lock.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventWhere(t, ch, ev.Index, "the lock to be free", func(ev LockEvent) bool { return ev.Holder() == nil })

	stop()
	for range ch {
	}
}

// TestWatchMovesToAnotherMember: a watch served by a member that stops
// goes on through another member, without going back in index or missing
// the current holder.
func TestWatchMovesToAnotherMember(t *testing.T) {
	c := startCluster(t, 3)
	lead := c.WaitLeader()
	ctx := testCtx(t)
	wcl := dial(t, c.Endpoints(lead))
	cl := dial(t, c.Endpoints(lead))
	s := newSession(t, cl, WithOwner("campaigner"), WithTTL(5*time.Second))
	if got := wcl.target(); got != c.ClientAddr(lead) {
		t.Fatalf("the watch would go to %s, not the leader %s", got, c.ClientAddr(lead))
	}
	ch, err := wcl.Watch(ctx, "leader/x")
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, ch)
	l1, err := s.Mutex("leader/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev = eventWhere(t, ch, ev.Index, "the first hold", func(ev LockEvent) bool { return ev.Holder() != nil })

	// The member serving the watch (and the session) stops.
	c.Stop(lead)
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Mutex("leader/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev = eventWhere(t, ch, ev.Index, "the second hold", func(ev LockEvent) bool {
		return ev.Holder() != nil && ev.Holder().Token == l2.Token()
	})
	if ev.Index < l2.Token() {
		t.Fatalf("event %+v is before the grant at %d", ev, l2.Token())
	}
}

// TestWatchOverHTTP: curl can follow a lock, one JSON object per line.
func TestWatchOverHTTP(t *testing.T) {
	c, cl := single(t)
	ctx := testCtx(t)
	s := newSession(t, cl) // the member leads from here on
	base := "http://" + c.ClientAddr(0)
	if resp, err := http.Get(base + "/v1/watch?name="); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("watch of an empty name: %v %v, want 400", resp.Status, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/watch?name="+url.QueryEscape("jobs/1"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	type line struct {
		Result struct {
			Lock *struct {
				Holders []struct {
					Token string `json:"token"`
				} `json:"holders"`
			} `json:"lock"`
			Index string `json:"index"`
		} `json:"result"`
	}
	read := func() line {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("stream ended: %v", sc.Err())
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		return l
	}
	if l := read(); l.Result.Lock != nil || l.Result.Index == "" {
		t.Fatalf("first line for a free lock: %+v (%s)", l, sc.Text())
	}
	lease, err := s.Mutex("jobs/1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := read()
	if l.Result.Lock == nil || len(l.Result.Lock.Holders) != 1 || l.Result.Lock.Holders[0].Token != strconv.FormatUint(lease.Token(), 10) {
		t.Fatalf("line after the acquire: %+v (token %d)", l, lease.Token())
	}

	// Resumed from before the hold, after it ended: the first line is
	// the free lock, marked as a gap, with the hold it missed.
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(base + "/v1/watch?name=jobs/1&after_index=x"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("watch with after_index=x: %v %v, want 400", resp.Status, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/watch?name=jobs/1&after_index=%d", base, lease.Token()-1), nil)
	resumed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Body.Close()
	first, err := bufio.NewReader(resumed.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var gap struct {
		Result struct {
			Lock   any  `json:"lock"`
			Gap    bool `json:"gap"`
			Missed []struct {
				Token string `json:"token"`
				How   string `json:"how"`
			} `json:"missed"`
			MissedAll bool `json:"missed_all"`
		} `json:"result"`
	}
	if err := json.Unmarshal(first, &gap); err != nil {
		t.Fatalf("%s: %v", first, err)
	}
	if r := gap.Result; r.Lock != nil || !r.Gap || !r.MissedAll || len(r.Missed) != 1 ||
		r.Missed[0].Token != strconv.FormatUint(lease.Token(), 10) || r.Missed[0].How != "HOLD_END_RELEASED" {
		t.Fatalf("resumed watch's first line: %s", first)
	}
}
