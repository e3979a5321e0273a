package liveness

import (
	"slices"
	"testing"
	"time"
)

// TestDeadlinesCountFromArrival: a keepalive moves its session's deadline
// to when it arrived plus the TTL, and a renewal its hold's to when it
// arrived plus the limit, however late the tracker is handed them (the
// server confirms its leadership first, a ReadIndex round). The client
// counts its own deadline from before it sent them; counted from the
// handling, the session and the hold would outlive "received + TTL" by
// the length of that round.
func TestDeadlinesCountFromArrival(t *testing.T) {
	l := newLeading(t)
	id := l.apply(openCmd(5*time.Second, 0)).GetSessionId()
	token := l.apply(acquireCmd(id, 1, "x", 0, 4*time.Second)).GetAcquire().GetToken()
	// Both arrived at 2s; the tracker handles them at 3s.
	arrived := start.Add(2 * time.Second)
	l.at(3 * time.Second)
	if _, err := l.tr.Heartbeat(id, arrived); err != nil {
		t.Fatal(err)
	}
	if _, err := l.tr.RenewHold("x", id, token, arrived); err != nil {
		t.Fatal(err)
	}
	if left, _ := l.tr.Remaining(id); left != 4*time.Second {
		t.Fatalf("at 3s, after a keepalive that arrived at 2s: %v left, want 4s (until 2s + the TTL, 5s)", left)
	}
	l.at(6*time.Second - time.Nanosecond)
	if len(l.p.holds) != 0 {
		t.Fatalf("expired %v before the renewed limit passed", l.p.holds)
	}
	l.at(6 * time.Second)
	if want := []string{key("x", id, token)}; !slices.Equal(l.p.holds, want) {
		t.Fatalf("at 6s: expired %v, want %v (2s + the limit, 4s)", l.p.holds, want)
	}
	l.expiresAt(id, 7*time.Second)
}
