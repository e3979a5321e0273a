package baton

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
)

// TestTransferLeadership: an operator hands the leader's office to a named
// member, then the new leader steps down (what `baton server` does on
// SIGTERM) to the furthest-along voter; a session and its hold live on
// through both, with no lease lost and no request failing. A transfer to
// the leader itself or to a member that does not exist is refused.
func TestTransferLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		cl := dialCluster(t, c, lead)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := cl.NewSession(ctx, WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := s.Mutex("maint/x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lost := whenLost(lease)

		if _, err := cl.TransferLeadership(ctx, c.Config(lead).Name); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("transfer to the leader itself: %v; want ErrInvalidArgument", err)
		}
		if _, err := cl.TransferLeadership(ctx, "n9"); !errors.Is(err, ErrNotFound) {
			t.Errorf("transfer to a member that does not exist: %v; want ErrNotFound", err)
		}

		to := (lead + 1) % 3
		start := time.Now()
		got, err := cl.TransferLeadership(ctx, c.Config(to).Name)
		if err != nil || got != c.Config(to).Name {
			t.Fatalf("transfer to %s: %q, %v", c.Config(to).Name, got, err)
		}
		took := time.Since(start)
		if !c.Member(to).IsLeader() || c.Member(lead).IsLeader() {
			t.Fatalf("after the transfer: member %d leads %v, member %d leads %v", to, c.Member(to).IsLeader(), lead, c.Member(lead).IsLeader())
		}
		// Far under an election timeout (10 ticks of 20 ms): the
		// transferee campaigned at once.
		if took >= 200*time.Millisecond {
			t.Errorf("the transfer took %v, as long as an election timeout", took)
		}

		// The hold survived: another session is refused, and the holder
		// releases and takes it again on the new leader.
		other, err := cl.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Mutex("maint/x").TryLock(ctx); !errors.Is(err, ErrLockBusy) {
			t.Fatalf("another session's TryLock after the transfer: %v; want busy", err)
		}

		// The new leader steps down, as on SIGTERM.
		if err := c.Member(to).StepDown(ctx); err != nil {
			t.Fatalf("StepDown: %v", err)
		}
		if c.Member(to).IsLeader() {
			t.Fatal("the member still leads after StepDown")
		}
		if err := c.Member(lead).StepDown(ctx); err != nil || !c.Member(lead).IsLeader() && c.Member(lead).Status().Leader == 0 {
			t.Fatalf("StepDown on a follower: %v", err)
		}
		select {
		case at := <-lost:
			t.Fatalf("the lease was lost at %v: %v", at, lease.Err())
		default:
		}
		if !lease.Valid() {
			t.Fatal("the lease is not valid after two transfers")
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release after two transfers: %v", err)
		}
		if l, err := other.Mutex("maint/x").TryLock(ctx); err != nil || l.Token() <= lease.Token() {
			t.Fatalf("the other session's TryLock after the release: %v (token above %d)", err, lease.Token())
		}
	})
}

// TestTransferLeadershipAlone: a member alone in its group has no one to
// hand its office to, and says so (not an internal error).
func TestTransferLeadershipAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cl := singleInMemory(t)
		_, err := cl.TransferLeadership(context.Background(), "")
		var e *Error
		if !errors.As(err, &e) || e.Code != codes.FailedPrecondition || !strings.Contains(e.Message, "no other voter") {
			t.Fatalf("transfer in a group of one: %v; want FAILED_PRECONDITION naming the missing voter", err)
		}
	})
}
