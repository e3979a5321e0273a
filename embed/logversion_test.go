package embed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/fsm"
)

// TestRollingUpgrade: a cluster whose members read log version 1 (as a
// release before log versions does) stays at 1 while its members are
// upgraded one at a time, the leader first, and meanwhile refuses what
// version 2 added (a hold limit on a set of locks) without proposing it,
// so no member meets an entry it cannot read. Once the last member says
// it reads this release's version, the leader raises the cluster's
// version, every member applies it, and the refused request works.
func TestRollingUpgrade(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t, 3, snapshotOften, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.LogVersion = 1 }))
	lead := c.WaitLeader()
	status := func(i int) *batonpb.StatusResponse {
		t.Helper()
		st, err := c.Client(i).Status(ctx, &batonpb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	heldSet := func(i int) error {
		cl := c.Client(i)
		s := openSession(t, cl, "upgrade", 10*time.Second)
		_, err := cl.AcquireMany(ctx, &batonpb.AcquireManyRequest{Header: hdr(s, 1), Names: []string{"a", "b"},
			HoldLimit: durationpb.New(5 * time.Second)})
		return err
	}
	if v := status(lead).GetLogVersion(); v != 1 {
		t.Fatalf("the cluster starts at log version %d, want 1", v)
	}
	// The Go client opens sessions with a nonce, which members reading
	// only version 1 stop at (as an older release stops at the unknown
	// field): through the whole upgrade, a session is opened and a lock
	// taken at every step, and no member may stop.
	useClient := func(step string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cl, err := baton.Dial(cctx, c.Endpoints(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		s, err := cl.NewSession(cctx)
		if err != nil {
			t.Fatalf("%s: open a session: %v", step, err)
		}
		lease, err := s.Mutex("upgrade/" + step).Lock(cctx)
		if err != nil {
			t.Fatalf("%s: lock: %v", step, err)
		}
		if err := lease.Release(cctx); err != nil {
			t.Fatalf("%s: release: %v", step, err)
		}
		if err := s.Close(cctx); err != nil {
			t.Fatalf("%s: close the session: %v", step, err)
		}
		for _, i := range c.Running() {
			if err := c.Member(i).Err(); err != nil {
				t.Fatalf("%s: member %d stopped: %v", step, i, err)
			}
		}
	}
	useClient("before")
	if err := heldSet(lead); code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "needs log version 2") {
		t.Fatalf("a hold-limited set at version 1: %v, want FAILED_PRECONDITION", err)
	}

	for k, i := range []int{lead, (lead + 1) % 3, (lead + 2) % 3} {
		c.Stop(i)
		c.ChangeConfig(i, func(cfg *embed.Config) { cfg.LogVersion = 0 }) // this release
		c.Start(i)
		lead = c.WaitLeader()
		useClient(fmt.Sprintf("upgraded-%d", k+1))
		if k == 2 {
			break
		}
		// One member still reads only version 1: what the leader's
		// raiseLogVersion would raise the version to is 1 at most.
		if v, ok := embed.LogVersionDue(c.Member(lead)); ok && v > 1 {
			t.Fatalf("after upgrading %d of 3 members the leader would raise the version to %d", k+1, v)
		}
		st := status(lead)
		if v := st.GetLogVersion(); v != 1 {
			t.Fatalf("after upgrading %d of 3 members the cluster is at %d; a member reads only 1", k+1, v)
		}
		behind := 0
		for _, m := range st.GetMembers() {
			if m.GetLogVersion() == 1 {
				behind++
			}
		}
		if behind != 2-k {
			t.Fatalf("after upgrading %d of 3 members, %d are listed at version 1: %v", k+1, behind, st.GetMembers())
		}
		if err := heldSet(lead); code(err) != codes.FailedPrecondition {
			t.Fatalf("a hold-limited set with a member at version 1: %v", err)
		}
	}
	embedtest.WaitFor(t, 10*time.Second, fmt.Sprintf("the cluster to reach log version %d", fsm.LogVersion), func() bool {
		return status(lead).GetLogVersion() == fsm.LogVersion
	})
	waitConverged(t, c)
	for i := range c.Len() {
		if v := c.Member(i).Status().LogVersion; v != fsm.LogVersion {
			t.Fatalf("member %d applied log version %d", i, v)
		}
	}
	if err := heldSet(lead); err != nil {
		t.Fatalf("a hold-limited set at version %d: %v", fsm.LogVersion, err)
	}
	useClient("after")
}
