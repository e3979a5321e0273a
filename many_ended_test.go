package baton

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/batonlock/baton/api/batonpb"
)

// manyEnded is a member (of the one-stream-per-session kind) that answers
// every AcquireMany as a retry does after one of the holds its first
// attempt got ended: "a" granted, "b" BUSY without a holder. It reports
// the releases it gets.
type manyEnded struct {
	sessionOnly
	released chan string
}

func (f *manyEnded) Session(gs batonpb.Baton_SessionServer) error {
	first, err := gs.Recv()
	if err != nil {
		return err
	}
	if err := gs.Send(&batonpb.SessionResponse{Id: first.GetId(), Kind: &batonpb.SessionResponse_Open{Open: &batonpb.OpenSessionResponse{
		SessionId: 42, Ttl: first.GetOpen().GetTtl(),
	}}}); err != nil {
		return err
	}
	for {
		r, err := gs.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		resp := &batonpb.SessionResponse{Id: r.GetId()}
		switch {
		case r.GetAcquireMany() != nil:
			resp.Kind = &batonpb.SessionResponse_AcquireMany{AcquireMany: &batonpb.AcquireManyResponse{Results: []*batonpb.AcquireResponse{
				{Name: "a", Acquired: true, Token: 7, Count: 1},
				{Name: "b"},
			}}}
		case r.GetRelease() != nil:
			f.released <- r.GetRelease().GetName()
			resp.Kind = &batonpb.SessionResponse_Release{Release: &batonpb.ReleaseResponse{}}
		default:
			continue
		}
		if err := gs.Send(resp); err != nil {
			return err
		}
	}
}

// TestTryLockAllAfterAHoldEnded: an all-or-none answer that grants one
// lock and not another (a retry's, after a hold the first attempt got
// ended) takes nothing: the client gives back the lock it was granted and
// says which lock was not taken, instead of keeping a lease the caller
// never sees.
func TestTryLockAllAfterAHoldEnded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &manyEnded{sessionOnly: sessionOnly{addr: ln.Addr().String()}, released: make(chan string, 4)}
	srv := grpc.NewServer()
	batonpb.RegisterBatonServer(srv, f)
	go srv.Serve(ln)
	defer srv.Stop()

	cl := dial(t, ln.Addr().String())
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
	case name := <-f.released:
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
