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
