package embed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/raftnode"
	"github.com/batonlock/baton/internal/testpki"
)

// addMember starts a member that AddMember added (with Join) and returns
// its index in c; adjust, if given, changes its configuration first.
func (c *testCluster) addMember(name, initialCluster string, peer, client testListeners, join bool, adjust ...func(*Config)) int {
	c.t.Helper()
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.DataDir = c.t.TempDir()
	cfg.ClientListener, cfg.PeerListener = client.l, peer.l
	cfg.ClientAddr, cfg.PeerAddr = client.addr, peer.addr
	cfg.TickInterval = 20 * time.Millisecond
	cfg.ElectionTicks = 10
	cfg.SnapshotEntries = 50
	cfg.InitialCluster = initialCluster
	cfg.Join = join
	for _, f := range adjust {
		f(&cfg)
	}
	c.cfgs = append(c.cfgs, cfg)
	c.members = append(c.members, nil)
	i := len(c.cfgs) - 1
	c.start(i)
	return i
}

type testListeners struct {
	l    net.Listener
	addr string
}

func code(err error) codes.Code { return status.Code(err) }

// Membership changes: a learner is added, catches up from a snapshot,
// is promoted, and counts in the majority once a first member is removed
// and the leader stops; every hold survives; bad requests change nothing.
func TestMembershipChanges(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	cl := c.client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 120, 1, tokens) // past SnapshotEntries: the newcomer gets a snapshot

	pl, cln := listen(t), listen(t)
	peerAddr := pl.Addr().String()
	for _, bad := range []*batonpb.AddMemberRequest{
		{Name: "", PeerAddr: peerAddr}, {Name: "n 4", PeerAddr: peerAddr}, {Name: "n4", PeerAddr: "nohost"},
		{Name: "n2", PeerAddr: peerAddr}, {Name: "n4", PeerAddr: c.cfgs[0].PeerAddr},
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
	n4 := c.addMember("n4", added.GetInitialCluster(), testListeners{pl, peerAddr}, testListeners{cln, cln.Addr().String()}, true)
	c.waitConverged()
	if _, err := cl.PromoteMember(ctx, &batonpb.PromoteMemberRequest{Name: "n2"}); code(err) != codes.InvalidArgument {
		t.Fatalf("promoting a voter: %v", err)
	}
	if _, err := cl.PromoteMember(ctx, &batonpb.PromoteMemberRequest{Name: "n4"}); err != nil {
		t.Fatalf("promote n4: %v", err)
	}
	c.waitConverged() // n4 applied its promotion too
	st, err := c.client(n4).Status(ctx, &batonpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetMembers()) != 4 || slicesAny(st.GetMembers(), func(m *batonpb.Member) bool { return m.GetLearner() }) {
		t.Fatalf("members after the promotion: %v", st.GetMembers())
	}

	// Remove a first member that does not lead; then stop the leader:
	// n4 is one of the two that are left.
	gone := (lead + 1) % 3
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[gone].Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[gone].Name}); code(err) != codes.NotFound {
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
	want := []string{`added member "n4" at ` + peerAddr + ` as a learner`, `promoted member "n4" to a voter`, fmt.Sprintf("removed member %q", c.cfgs[gone].Name)}
	if !slices.Equal(actions, want) {
		t.Fatalf("audit %q, want %q", actions, want)
	}
	c.stop(gone)
	c.stop(lead)
	lead = c.waitLeader()
	cl = c.client(lead)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 500), Name: "after"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire with the new majority: %v %v", r, err)
	}
	// A restarted newcomer keeps the membership (its log and snapshot
	// say it, whatever its flags).
	c.stop(n4)
	c.start(n4)
	c.waitLeader()
	c.waitConverged()
	ms := c.members[n4].Node().Membership()
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
	if _, err := c.client(c.waitLeader()).AddMember(ctx, &batonpb.AddMemberRequest{Name: c.cfgs[gone].Name, PeerAddr: "127.0.0.1:1"}); code(err) != codes.InvalidArgument {
		t.Fatalf("adding a removed name again: %v", err)
	}
	// A cold restart of all three: the first members' flags still name the
	// old cluster, and n4's address comes from the log's record of it.
	var running []int
	for i, m := range c.members {
		if m != nil {
			running = append(running, i)
		}
	}
	for _, i := range running {
		c.stop(i)
	}
	for _, i := range running {
		c.start(i)
	}
	lead = c.waitLeader()
	cl = c.client(lead)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 501), Name: "after/restart"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire after a cold restart: %v %v", r, err)
	}
	c.waitConverged()
}

// Removing the leader: it applies its own removal, steps down and stops
// (ErrRemoved); the other two elect a leader among themselves and serve.
func TestRemovingTheLeader(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	cl := c.client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"})
	if err != nil || !held.GetAcquired() {
		t.Fatal(held, err)
	}
	node := c.members[lead].Node()
	_, err = cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[lead].Name})
	if err != nil && code(err) != codes.Unavailable {
		t.Fatalf("removing the leader: %v", err) // Unavailable: it stopped before its answer left
	}
	select {
	case <-node.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the removed leader still runs")
	}
	if !errors.Is(node.Err(), raftnode.ErrRemoved) {
		t.Fatalf("the removed leader stopped with %v", node.Err())
	}
	c.stop(lead)
	lead = c.waitLeader()
	cl = c.client(lead)
	if ms := c.members[lead].Node().Membership(); len(ms.Voters) != 2 {
		t.Fatalf("voters %v", ms.Voters)
	}
	got, err := cl.Get(ctx, &batonpb.GetRequest{Name: "x"})
	if err != nil || len(got.GetLock().GetHolders()) != 1 || got.GetLock().GetHolders()[0].GetToken() != held.GetToken() {
		t.Fatalf("x after the leader's removal: %v %v", got, err)
	}
	// Two voters: one may go (the leader again), and the last may not.
	node = c.members[lead].Node()
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[lead].Name}); err != nil && code(err) != codes.Unavailable {
		t.Fatal(err)
	}
	<-node.Done()
	c.stop(lead)
	lead = c.waitLeader()
	if _, err := c.client(lead).RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[lead].Name}); code(err) != codes.InvalidArgument {
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
	c := newTestCluster(t, 3)
	cl := c.client(c.waitLeader())
	type result struct {
		name string
		err  error
	}
	added := map[string]bool{}
	aborted := 0
	for round := range 5 {
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
	ms := c.members[c.waitLeader()].Node().Membership()
	if len(ms.Learners) != len(added) {
		t.Fatalf("%d learners, %d additions succeeded", len(ms.Learners), len(added))
	}
	t.Logf("%d additions, %d aborted", len(added), aborted)
}

// A newcomer started without Join bootstraps a cluster of its own: its
// cluster id differs, so the members refuse it both ways and it never
// takes part (before ids, raft took its bootstrap entries for the
// cluster's). The cluster goes on without it.
func TestNewcomerWithoutJoinIsRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	cl := c.client(lead)
	ctx := context.Background()
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 20, 1, tokens)
	gone := (lead + 1) % 3
	if _, err := cl.RemoveMember(ctx, &batonpb.RemoveMemberRequest{Name: c.cfgs[gone].Name}); err != nil {
		t.Fatal(err)
	}
	c.stop(gone)
	pl, cln := listen(t), listen(t)
	added, err := cl.AddMember(ctx, &batonpb.AddMemberRequest{Name: "n4", PeerAddr: pl.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	i := c.addMember("n4", added.GetInitialCluster(), testListeners{pl, pl.Addr().String()}, testListeners{cln, cln.Addr().String()}, false)
	acquireEach(t, cl, a, "after", 10, 100, tokens)
	if st := c.members[i].Node().Status(); st.Applied > 3 || st.Commit > 3 {
		t.Fatalf("the newcomer without Join took part: %+v", st)
	}
	c.stop(i)
	c.waitConverged()
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
	peerTLS := func(cfg *Config) {
		if cfg.PeerTLS, err = pki.PeerConfig(cfg.Name); err != nil {
			t.Fatal(err)
		}
	}
	c := newTestClusterWith(t, 1, func(_ int, cfg *Config) { peerTLS(cfg) })
	lead := c.waitLeader()
	cl := c.client(lead)
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 10, 1, tokens)
	pl, cln := listen(t), listen(t)
	added, err := cl.AddMember(context.Background(), &batonpb.AddMemberRequest{Name: "n2", PeerAddr: pl.Addr().String(), Learner: true})
	if err != nil {
		t.Fatal(err)
	}
	n2 := c.addMember("n2", added.GetInitialCluster(), testListeners{pl, pl.Addr().String()}, testListeners{cln, cln.Addr().String()}, true, peerTLS)
	acquireEach(t, cl, a, "after", 10, 100, tokens)
	c.waitConverged() // the same state on both: they talk both ways
	if got := c.members[n2].Node().Status().Applied; got < 20 {
		t.Fatalf("n2 applied %d entries, want its 20 acquires at least", got)
	}
	checkHolds(t, cl, tokens)
}
