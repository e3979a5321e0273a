package embed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/testpki"
)

func code(err error) codes.Code { return status.Code(err) }

// Membership changes: a learner is added, catches up from a snapshot,
// is promoted, and counts in the majority once a first member is removed
// and the leader stops; every hold survives; bad requests change nothing.
func TestMembershipChanges(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 120, 1, tokens) // past SnapshotEntries: the newcomer gets a snapshot

	n4cfg := c.MemberConfig("n4")
	peerAddr := n4cfg.PeerAddr
	for _, bad := range []*batonpb.AddMemberRequest{
		{Name: "", PeerAddr: peerAddr}, {Name: "n 4", PeerAddr: peerAddr}, {Name: "n4", PeerAddr: "nohost"},
		{Name: "n2", PeerAddr: peerAddr}, {Name: "n4", PeerAddr: c.Config(0).PeerAddr},
	} {
		if _, err := cl.AddMember(ctx, bad); err == nil {
			t.Fatalf("AddMember(%v) succeeded", bad)
		}
	}
	added, err := cl.AddMember(ctx, &batonpb.AddMemberRequest{Name: "n4", PeerAddr: peerAddr, Learner: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(added.GetInitialCluster(), "="); n != 4 || !strings.Contains(added.GetInitialCluster(), "n4="+peerAddr) {
		t.Fatalf("initial cluster %q", added.GetInitialCluster())
	}
	if _, err := cl.AddMember(ctx, &batonpb.AddMemberRequest{Name: "n4", PeerAddr: "127.0.0.1:1"}); code(err) != codes.AlreadyExists {
		t.Fatalf("adding n4 twice: %v", err)
	}
	n4cfg.InitialCluster, n4cfg.Join = added.GetInitialCluster(), true
	n4 := c.Add(n4cfg)
	waitConverged(t, c)
	if _, err := cl.PromoteMember(ctx, &batonpb.PromoteMemberRequest{Name: "n2"}); code(err) != codes.InvalidArgument {
		t.Fatalf("promoting a voter: %v", err)
	}
	if _, err := cl.PromoteMember(ctx, &batonpb.PromoteMemberRequest{Name: "n4"}); err != nil {
		t.Fatalf("promote n4: %v", err)
	}
	waitConverged(t, c) // n4 applied its promotion too
	st, err := c.Client(n4).Status(ctx, &batonpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetMembers()) != 4 || slicesAny(st.GetMembers(), func(m *batonpb.Member) bool { return m.GetLearner() }) {
		t.Fatalf("members after the promotion: %v", st.GetMembers())
	}

	// Remove a first member that does not lead; then stop the leader:
	// n4 is one of the two that are left.
	gone := (lead + 1) % 3
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(gone).Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(gone).Name}); code(err) != codes.NotFound {
		t.Fatalf("removing it twice: %v", err)
	}
	// Every change that applied is in the audit, once.
	audit, err := cl.Audit(ctx, &batonpb.AuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range audit.GetEntries() {
		actions = append(actions, e.GetAction())
	}
	want := []string{`added member "n4" at ` + peerAddr + ` as a learner`, `promoted member "n4" to a voter`, fmt.Sprintf("removed member %q", c.Config(gone).Name)}
	if !slices.Equal(actions, want) {
		t.Fatalf("audit %q, want %q", actions, want)
	}
	c.Stop(gone)
	c.Stop(lead)
	lead = c.WaitLeader()
	cl = c.Client(lead)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 500), Name: "after"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire with the new majority: %v %v", r, err)
	}
	// A restarted newcomer keeps the membership (its log and snapshot
	// say it, whatever its flags).
	c.Stop(n4)
	c.Start(n4)
	c.WaitLeader()
	waitConverged(t, c)
	ms := embed.RaftNode(c.Member(n4)).Membership()
	removed := 0
	for _, r := range ms.Members {
		if r.Removed {
			removed++
		}
	}
	if len(ms.Voters) != 3 || len(ms.Learners) != 0 || len(ms.Members) != 4 || removed != 1 {
		t.Fatalf("membership after n4's restart: %+v", ms)
	}
	// A removed name does not come back.
	if _, err := c.Client(c.WaitLeader()).AddMember(ctx, &batonpb.AddMemberRequest{Name: c.Config(gone).Name, PeerAddr: "127.0.0.1:1"}); code(err) != codes.InvalidArgument {
		t.Fatalf("adding a removed name again: %v", err)
	}
	// A cold restart of all three: the first members' flags still name the
	// old cluster, and n4's address comes from the log's record of it.
	running := c.Running()
	for _, i := range running {
		c.Stop(i)
	}
	for _, i := range running {
		c.Start(i)
	}
	lead = c.WaitLeader()
	cl = c.Client(lead)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 501), Name: "after/restart"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire after a cold restart: %v %v", r, err)
	}
	waitConverged(t, c)
}

// Removing the leader: it applies its own removal, steps down and stops
// (ErrRemoved); the other two elect a leader among themselves and serve.
func TestRemovingTheLeader(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"})
	if err != nil || !held.GetAcquired() {
		t.Fatal(held, err)
	}
	removed := c.Member(lead)
	_, err = cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(lead).Name})
	if err != nil && code(err) != codes.Unavailable {
		t.Fatalf("removing the leader: %v", err) // Unavailable: it stopped before its answer left
	}
	select {
	case <-removed.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the removed leader still runs")
	}
	if !errors.Is(removed.Err(), embed.ErrRemoved) {
		t.Fatalf("the removed leader stopped with %v", removed.Err())
	}
	c.Stop(lead)
	lead = c.WaitLeader()
	cl = c.Client(lead)
	if ms := embed.RaftNode(c.Member(lead)).Membership(); len(ms.Voters) != 2 {
		t.Fatalf("voters %v", ms.Voters)
	}
	got, err := cl.Get(ctx, &batonpb.GetRequest{Name: "x"})
	if err != nil || len(got.GetLock().GetHolders()) != 1 || got.GetLock().GetHolders()[0].GetToken() != held.GetToken() {
		t.Fatalf("x after the leader's removal: %v %v", got, err)
	}
	// Two voters: one may go (the leader again), and the last may not.
	removed = c.Member(lead)
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(lead).Name}); err != nil && code(err) != codes.Unavailable {
		t.Fatal(err)
	}
	<-removed.Done()
	c.Stop(lead)
	lead = c.WaitLeader()
	if _, err := c.Client(lead).RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(lead).Name}); code(err) != codes.InvalidArgument {
		t.Fatalf("removing the last voter: %v", err)
	}
}

func slicesAny[T any](s []T, f func(T) bool) bool {
	for _, x := range s {
		if f(x) {
			return true
		}
	}
	return false
}

// Two membership changes at once: raft takes one at a time and swaps the
// other for an empty entry; that one is answered Aborted at once (not
// left to time out), and the members are what the successful calls say.
func TestConcurrentMembershipChanges(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	cl := c.Client(c.WaitLeader())
	type result struct {
		name string
		err  error
	}
	added := map[string]bool{}
	aborted := 0
	const rounds = 5
	for round := range rounds {
		ch := make(chan result, 2)
		for k := range 2 {
			name := fmt.Sprintf("l%d-%d", round, k)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := cl.AddMember(ctx, &batonpb.AddMemberRequest{Name: name, PeerAddr: fmt.Sprintf("127.0.0.1:%d", 20000+10*round+k), Learner: true})
				ch <- result{name, err}
			}()
		}
		for range 2 {
			r := <-ch
			switch code(r.err) {
			case codes.OK:
				added[r.name] = true
			case codes.Aborted:
				aborted++
			default:
				t.Fatalf("AddMember(%s): %v", r.name, r.err)
			}
		}
	}
	ms := embed.RaftNode(c.Member(c.WaitLeader())).Membership()
	if len(ms.Learners) != len(added) {
		t.Fatalf("%d learners, %d additions succeeded", len(ms.Learners), len(added))
	}
	t.Logf("%d additions, %d aborted", len(added), aborted)
	// Each round one of the two goes through; in most the other is
	// aborted. None aborted means the changes never overlapped.
	if len(added) < rounds {
		t.Errorf("%d additions in %d rounds, want one a round at least", len(added), rounds)
	}
	if aborted == 0 {
		t.Errorf("no change was aborted in %d rounds: the two changes of a round never overlapped", rounds)
	}
}

// A newcomer started without Join bootstraps a cluster of its own: its
// cluster id differs, so the members refuse it both ways and it never
// takes part (before ids, raft took its bootstrap entries for the
// cluster's). The cluster goes on without it.
func TestNewcomerWithoutJoinIsRefused(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 20, 1, tokens)
	gone := (lead + 1) % 3
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.Config(gone).Name}); err != nil {
		t.Fatal(err)
	}
	c.Stop(gone)
	n4 := c.MemberConfig("n4")
	added, err := cl.AddMember(ctx, &batonpb.AddMemberRequest{Name: "n4", PeerAddr: n4.PeerAddr})
	if err != nil {
		t.Fatal(err)
	}
	n4.InitialCluster = added.GetInitialCluster()
	i := c.Add(n4)
	acquireEach(t, cl, a, "after", 10, 100, tokens)
	if st := c.Member(i).Status(); st.Applied > 3 || st.Commit > 3 {
		t.Fatalf("the newcomer without Join took part: %+v", st)
	}
	c.Stop(i)
	waitConverged(t, c)
	checkHolds(t, cl, tokens)
}

// With peer TLS a member added later joins: the leader finds its name in
// the membership it applied (it was in no initial cluster), the newcomer
// finds the leader's in its initial cluster, and each one's certificate
// names it.
func TestJoinWithPeerTLS(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	peerTLS := func(cfg *embed.Config) {
		if cfg.PeerTLS, err = pki.PeerConfig(cfg.Name); err != nil {
			t.Fatal(err)
		}
	}
	c := startCluster(t, 1, snapshotOften, embedtest.Configure(func(_ int, cfg *embed.Config) { peerTLS(cfg) }))
	lead := c.WaitLeader()
	cl := c.Client(lead)
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 10, 1, tokens)
	n2cfg := c.MemberConfig("n2") // peerTLS applies to it too
	added, err := cl.AddMember(context.Background(), &batonpb.AddMemberRequest{Name: "n2", PeerAddr: n2cfg.PeerAddr, Learner: true})
	if err != nil {
		t.Fatal(err)
	}
	n2cfg.InitialCluster, n2cfg.Join = added.GetInitialCluster(), true
	n2 := c.Add(n2cfg)
	acquireEach(t, cl, a, "after", 10, 100, tokens)
	waitConverged(t, c) // the same state on both: they talk both ways
	if got := c.Member(n2).Status().Applied; got < 20 {
		t.Fatalf("n2 applied %d entries, want its 20 acquires at least", got)
	}
	checkHolds(t, cl, tokens)
}
