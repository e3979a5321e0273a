package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestRevokeAcrossLeaderChange: in a 3-member cluster, a holder that
// ignores a revoke is ended at the grace even though the leader that
// applied the revoke stops in the meantime: the new leader times the
// grace afresh, in full, from its election, and ends the hold through
// the log. The holder's Lease is lost with ErrRevoked, Check of the old
// token turns false on every member, and the next holder's token is
// higher. A second holder, told of its own revoke, lets go within the
// grace and its hold ends as a release.
func TestRevokeAcrossLeaderChange(t *testing.T) {
	skipShort(t)
	c := embedtest.New(t, 3)
	lead := c.WaitLeader()
	var others []int
	for i := range c.Len() {
		if i != lead {
			others = append(others, i)
		}
	}
	// The clients reach the cluster through the members that stay.
	cl := dial(t, c.ClientAddr(others[0])+","+c.ClientAddr(others[1]))
	ctx := testCtx(t)
	ignorer, polite, next := newSession(t, cl, baton.WithTTL(20*time.Second)), newSession(t, cl, baton.WithTTL(20*time.Second)), newSession(t, cl)
	stubborn, err := ignorer.Mutex("jobs/stubborn").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kind, err := polite.Mutex("jobs/polite").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	const grace = 8 * time.Second
	asked := time.Now()
	if _, err := cl.RevokeLock(ctx, "jobs/stubborn", baton.WithGrace(grace), baton.WithRevokeToken(stubborn.Token())); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RevokeLock(ctx, "jobs/polite", baton.WithGrace(grace)); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*baton.Lease{stubborn, kind} {
		select {
		case <-l.RevokeRequested():
		case <-time.After(grace / 2):
			t.Fatalf("the holder of %s was not told of its revoke within %v", l.Name(), grace/2)
		}
	}
	if err := kind.Release(ctx); err != nil {
		t.Fatalf("the polite holder's release: %v", err)
	}

	// The leader that applied the revokes stops; another is elected.
	c.Stop(lead)
	stopped := time.Now()
	if d := stopped.Sub(asked); d >= grace {
		t.Fatalf("the old leader stopped %v after the revoke, past the grace %v: the test could not cross a leader change", d, grace)
	}
	newLead := c.WaitLeader()
	if newLead == lead {
		t.Fatalf("member %d still leads after it stopped", lead)
	}

	ctx = testCtx(t)
	select {
	case <-stubborn.Lost():
	case <-ctx.Done():
		t.Fatal("the ignored hold was never ended")
	}
	ended := time.Now()
	// Never before the grace from the revoke; the new leader gives it a
	// full grace from its election, so not before the grace from the
	// stop of the old one either.
	if d := ended.Sub(asked); d < grace {
		t.Fatalf("the hold ended %v after the revoke, before its grace %v", d, grace)
	}
	if d := ended.Sub(stopped); d < grace {
		t.Fatalf("the hold ended %v after the old leader stopped; the new leader's full grace is %v", d, grace)
	}
	if err := stubborn.Err(); !errors.Is(err, baton.ErrRevoked) || !errors.Is(err, baton.ErrNotHeld) {
		t.Fatalf("the ignored Lease's error: %v, want ErrRevoked", err)
	}
	for _, i := range others {
		mc := dial(t, c.ClientAddr(i))
		held, err := mc.Check(ctx, "jobs/stubborn", stubborn.Token())
		if err != nil || held {
			t.Fatalf("Check of the revoked token through member %d: %v, %v; want false", i, held, err)
		}
	}
	after, err := next.Mutex("jobs/stubborn").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Token() <= stubborn.Token() {
		t.Fatalf("the next holder's token %d is not above the revoked one's %d", after.Token(), stubborn.Token())
	}
	for name, how := range map[string]string{"jobs/stubborn": "revoked", "jobs/polite": "released"} {
		info, err := cl.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.History) == 0 || info.History[0].How != how {
			t.Fatalf("%s's history %+v: want its hold %s", name, info.History, how)
		}
	}
}
