package baton_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/batonlock/baton"
)

// An operator asks the holder of a lock to let go; the holder finishes its
// step and releases within the grace.
func ExampleClient_RevokeLock() {
	m, stop := startNode()
	defer stop()
	ctx := context.Background()
	client, err := baton.Dial(ctx, m.ClientAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	s, err := client.NewSession(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	lease, err := s.Mutex("jobs/nightly").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// The operator's side (baton revoke jobs/nightly --grace 1m).
	if _, err := client.RevokeLock(ctx, "jobs/nightly", baton.WithGrace(time.Minute)); err != nil {
		log.Fatal(err)
	}

	// The holder's side.
	<-lease.RevokeRequested()
	r, _ := lease.Revocation()
	fmt.Println("asked to let go within", r.Grace)
	if err := lease.Release(ctx); err != nil { // after the step under way
		log.Fatal(err)
	}
	// Output:
	// asked to let go within 1m0s
}
