package baton

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton/api/batonpb"
)

// TestTryLockAllAfterAHoldEnded: an all-or-none answer that grants one
// lock and not another (a retry's, after a hold the first attempt got
// ended: BUSY without a holder) takes nothing: the client gives back the
// lock it was granted and says which lock was not taken, instead of
// keeping a lease the caller never sees.
func TestTryLockAllAfterAHoldEnded(t *testing.T) {
	released := make(chan string, 4)
	// A member that answers every AcquireMany as such a retry: "a"
	// granted, "b" BUSY without a holder.
	f := &scriptedMember{answer: func(r *batonpb.SessionRequest) *batonpb.SessionResponse {
		switch {
		case r.GetAcquireMany() != nil:
			return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_AcquireMany{AcquireMany: &batonpb.AcquireManyResponse{Results: []*batonpb.AcquireResponse{
				{Name: "a", Acquired: true, Token: 7, Count: 1},
				{Name: "b"},
			}}}}
		case r.GetRelease() != nil:
			released <- r.GetRelease().GetName()
			return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Release{Release: &batonpb.ReleaseResponse{}}}
		}
		return nil
	}}
	cl := serveFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := s.TryLockAll(ctx, "a", "b")
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Name != "b" || len(leases) != 0 {
		t.Fatalf("TryLockAll = %v, %v; want no leases and a BusyError for b", leases, err)
	}
	select {
	case name := <-released:
		if name != "a" {
			t.Fatalf("released %q, want a", name)
		}
	case <-ctx.Done():
		t.Fatal("the lock granted beside the ended one was not given back")
	}

	// TryLockMany keeps what it got and names what it did not.
	got, notTaken, err := s.TryLockMany(ctx, "a", "b")
	if err != nil || len(got) != 1 || got[0].Token() != 7 || len(notTaken) != 1 || notTaken[0] != "b" {
		t.Fatalf("TryLockMany = %v, %v, %v; want a's lease and b not taken", got, notTaken, err)
	}
}
