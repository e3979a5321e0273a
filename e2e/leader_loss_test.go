package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	. "github.com/batonlock/baton" // moved from the baton package: its names as they were there
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed/embedtest"
)

// The tests here cut a leader off from both followers (they stop): what
// it still answers, and how, is the members' business, not the client's.

// TestRenewalNeedsTheMajority: a leader cut off from its followers may
// not know yet that it no longer leads, and a renewal it acknowledged
// could outlast the limit a new leader starts at its election. So a
// renewal is answered only after a ReadIndex round; alone, the leader
// never answers it.
func TestRenewalNeedsTheMajority(t *testing.T) {
	skipShort(t)
	c := embedtest.New(t, 3)
	lead := c.WaitLeader()
	ctx := testCtx(t)
	cl := dial(t, c.ClientAddr(lead))
	s := newSession(t, cl, WithTTL(10*time.Second))
	l, err := s.Mutex("jobs/limited", WithHoldLimit(5*time.Second), WithManualRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renewal with the majority: %v", err)
	}
	for i := range c.Len() {
		if i != lead {
			c.Stop(i)
		}
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch err := l.Renew(short); {
	case err == nil:
		t.Fatal("a leader without its majority acknowledged a renewal")
	case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable):
		// Another answer would be a decision the lone leader may not make.
		t.Fatalf("renewal with the leader alone: %v, want no answer (the call's deadline, or unavailable)", err)
	}
}

// TestWatchEndsWhenItsMemberLosesTheLeader: a member cut off from the
// majority applies nothing new, so a watch it serves would show an old
// state as current; it ends the stream instead (UNAVAILABLE), and the Go
// client moves to another member. Here the leader that serves the watch
// loses both followers and steps down (CheckQuorum).
func TestWatchEndsWhenItsMemberLosesTheLeader(t *testing.T) {
	skipShort(t)
	c := embedtest.New(t, 3)
	f := c.WaitLeader()
	ctx := testCtx(t)
	cc, err := grpc.NewClient(c.ClientAddr(f), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := batonpb.NewBatonClient(cc).Watch(ctx, &batonpb.WatchRequest{Name: "leader/y"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first state from the leader: %v", err)
	}
	for i := range c.Len() {
		if i != f {
			c.Stop(i)
		}
	}
	start := time.Now()
	_, err = st.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("watch on a member alone: %v, want UNAVAILABLE", err)
	}
	t.Logf("the stream ended %v after the majority stopped", time.Since(start).Round(time.Millisecond))
}
