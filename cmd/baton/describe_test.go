package main

import (
	"testing"

	"github.com/batonlock/baton"
)

// TestDescribeLeader: `baton observe` prints one line per event, and says
// when an event follows a gap that leaders may have come and gone in.
func TestDescribeLeader(t *testing.T) {
	for _, tt := range []struct {
		l    baton.Leader
		want string
	}{
		{baton.Leader{Index: 7}, `index 7: e has no leader`},
		{baton.Leader{Index: 9, Term: 8, Value: "10.0.0.1:80", SessionID: 3, Owner: "web-1"}, `index 9: e led by web-1 (session 3), term 8, value "10.0.0.1:80"`},
		{baton.Leader{Index: 12, Term: 11, Value: "x", SessionID: 4, Owner: "web-2", Gap: true}, `index 12: e led by web-2 (session 4), term 11, value "x" (after a gap: earlier leaders may have come and gone unseen)`},
		{baton.Leader{Index: 13, Gap: true}, `index 13: e has no leader (after a gap: earlier leaders may have come and gone unseen)`},
	} {
		if got := describeLeader("e", tt.l); got != tt.want {
			t.Errorf("describeLeader(%+v):\n got %s\nwant %s", tt.l, got, tt.want)
		}
	}
}

// TestDescribeEventAfterAGap: `baton watch` prints the holds a gap hid,
// each on its line, before the state after it, and says when the history
// did not reach back.
func TestDescribeEventAfterAGap(t *testing.T) {
	ev := baton.LockEvent{Index: 20, Lock: baton.LockInfo{Name: "e"}, Gap: true, Missed: []baton.PastHold{
		{SessionID: 3, Owner: "web-1", Token: 11, EndedIndex: 15, How: "released", Value: "a"},
		{SessionID: 4, Owner: "web-2", Token: 15, EndedIndex: 19, How: "session expired"},
	}}
	want := `index 15: e: the hold of web-1 (session 3), key "", token 11 ended (released), value "a"
index 19: e: the hold of web-2 (session 4), key "", token 15 ended (session expired)
index 20: e: after a gap: earlier holds may have come and gone unseen
index 20: e free`
	if got := describeEvent(ev); got != want {
		t.Errorf("describeEvent after a gap:\n got %s\nwant %s", got, want)
	}
	ev.MissedAll, ev.Missed = true, nil
	if got := describeEvent(ev); got != "index 20: e free" {
		t.Errorf("describeEvent after a gap that hid nothing: %s", got)
	}
}
