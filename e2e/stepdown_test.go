package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestLeaderStepsDownOnSIGTERM: a leader given SIGTERM hands its office on
// before it exits (its log says to whom), so a rolling restart costs no
// election timeout: a client holding a lock through it keeps its lease,
// and a waiter queued on the old leader is served by the new one.
func TestLeaderStepsDownOnSIGTERM(t *testing.T) {
	skipShort(t)
	addrs := freeLoopbackAddrs(t, 6)
	// Long election timeouts (tick 100 ms x 30 = 3 s): without a hand-off
	// the others would wait that long for a leader.
	c := newCluster(t, clusterConfig{n: 3, clientAddrs: addrs[:3], peerAddrs: addrs[3:],
		extraArgs: []string{"--tick", "100ms", "--election-ticks", "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.start(ctx)
	lead := waitLeaderNode(t, ctx, c)
	cl := dial(t, strings.Join(c.endpoints(), ","))
	s := newSession(t, cl, baton.WithTTL(10*time.Second))
	lease, err := s.Mutex("rolling/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if !lead.stop() {
		t.Fatalf("%s did not exit within 10 s of SIGTERM", lead.name)
	}
	if lines := grepLog(lead.logPath, "handed leadership on before stopping"); len(lines) == 0 {
		t.Fatalf("%s's log does not say it handed leadership on:\n%s", lead.name, tail(lead.logPath, 20))
	}
	var next *node
	for _, nd := range c.nodes {
		if nd == lead {
			continue
		}
		if st, err := nd.status(ctx); err == nil && st.Leader != "" && st.Leader != lead.name {
			next = nd
			break
		}
	}
	if next == nil {
		t.Fatal("no other member leads right after the old leader exited")
	}
	if d := time.Since(start); d >= 3*time.Second {
		t.Errorf("a leader known %v after SIGTERM: not under the election timeout (3 s)", d)
	}
	if !lease.Valid() {
		t.Fatalf("the lease is not valid after the leader stepped down: %v", lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release on the new leader: %v", err)
	}
}

// waitLeaderNode waits until the members agree on a leader and returns it.
func waitLeaderNode(t *testing.T, ctx context.Context, c *cluster) *node {
	t.Helper()
	for {
		st, err := c.nodes[0].status(ctx)
		if err == nil && st.Leader != "" {
			for _, nd := range c.nodes {
				if nd.name == st.Leader {
					return nd
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
