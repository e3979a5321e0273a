package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/testenv"
)

// netLab is three network namespaces, one per member. Each has
//   - a client link: veth "c0" (10.213.<i>.2/24) to the test's namespace
//     (10.213.<i>.1/24 on "<tag>c<i>"), where the client API listens;
//   - a peer address 10.214.0.<i>/32 on lo, where the Raft transport
//     listens, reached over a full mesh of veth pairs: in namespace i,
//     "p<j>" leads to namespace j, with a /32 route to j's peer address.
//
// Cutting i->j replaces the root qdisc of p<j> in namespace i with a
// pfifo of limit 0, which silently drops everything i sends to j (TCP
// then stalls in both directions on the connections over that link, as
// it does under a real one-way loss); healing deletes the qdisc. Client
// links are never cut, so the test can always ask every member.
type netLab struct {
	t   *testing.T
	tag string
	ns  []string
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetLab builds the namespaces or, where the machine cannot, skips t
// (fails it under testenv.Strict), saying why. Cleanup deletes
// the namespaces (and with them every veth made here).
func newNetLab(t *testing.T, n int) *netLab {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "partition test needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "partition test needs iproute2's ip: %v", err)
	}
	if _, err := exec.LookPath("tc"); err != nil {
		testenv.Missing(t, "partition test needs iproute2's tc: %v", err)
	}
	lockNetLab(t)
	lab := &netLab{t: t, tag: fmt.Sprintf("bt%04x", os.Getpid()&0xffff)}
	if out, _ := exec.Command("ip", "route", "show", "10.213.0.0/16").CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		testenv.Missing(t, "10.213.0.0/16 is already routed here (%s); another partition test may be running", strings.TrimSpace(string(out)))
	}
	probe := lab.tag + "-probe"
	if err := run("ip", "netns", "add", probe); err != nil {
		testenv.Missing(t, "cannot create network namespaces: %v", err)
	}
	_ = run("ip", "netns", "del", probe)
	t.Cleanup(lab.destroy)
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-n%d", lab.tag, i)
		lab.ns = append(lab.ns, ns)
		host := fmt.Sprintf("%sc%d", lab.tag, i)
		for _, cmd := range [][]string{
			{"ip", "netns", "add", ns},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "addr", "add", fmt.Sprintf("10.214.0.%d/32", i), "dev", "lo"},
			{"ip", "link", "add", host, "type", "veth", "peer", "name", "c0", "netns", ns},
			{"ip", "addr", "add", fmt.Sprintf("10.213.%d.1/24", i), "dev", host},
			{"ip", "link", "set", host, "up"},
			{"ip", "-n", ns, "addr", "add", fmt.Sprintf("10.213.%d.2/24", i), "dev", "c0"},
			{"ip", "-n", ns, "link", "set", "c0", "up"},
		} {
			if err := run(cmd...); err != nil {
				testenv.Missing(t, "cannot build the namespace network: %v", err)
			}
		}
	}
	for i := 1; i <= n; i++ {
		for j := i + 1; j <= n; j++ {
			a, b := lab.ns[i-1], lab.ns[j-1]
			for _, cmd := range [][]string{
				{"ip", "link", "add", fmt.Sprintf("p%d", j), "netns", a, "type", "veth", "peer", "name", fmt.Sprintf("p%d", i), "netns", b},
				{"ip", "-n", a, "link", "set", fmt.Sprintf("p%d", j), "up"},
				{"ip", "-n", b, "link", "set", fmt.Sprintf("p%d", i), "up"},
				{"ip", "-n", a, "route", "add", fmt.Sprintf("10.214.0.%d/32", j), "dev", fmt.Sprintf("p%d", j), "src", fmt.Sprintf("10.214.0.%d", i)},
				{"ip", "-n", b, "route", "add", fmt.Sprintf("10.214.0.%d/32", i), "dev", fmt.Sprintf("p%d", i), "src", fmt.Sprintf("10.214.0.%d", j)},
			} {
				if err := run(cmd...); err != nil {
					testenv.Missing(t, "cannot build the namespace network: %v", err)
				}
			}
		}
	}
	return lab
}

// lockNetLab waits until no other process on the machine builds or uses a
// lab (two test binaries at once, from two checkouts), and holds that
// until t ends: labs share the 10.213/16 and 10.214/16 addresses, so two
// at once would route one lab's clients to the other's members.
func lockNetLab(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "baton-e2e-netlab.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("open the lab's lock file: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock the lab's lock file: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

func (lab *netLab) destroy() {
	for i, ns := range lab.ns {
		_ = run("ip", "link", "del", fmt.Sprintf("%sc%d", lab.tag, i+1))
		if err := run("ip", "netns", "del", ns); err != nil {
			lab.t.Logf("cleanup: %v", err)
		}
	}
}

// cut drops everything member i sends to member j (1-based).
func (lab *netLab) cut(i, j int) {
	lab.t.Helper()
	if err := run("ip", "netns", "exec", lab.ns[i-1], "tc", "qdisc", "replace", "dev", fmt.Sprintf("p%d", j), "root", "pfifo", "limit", "0"); err != nil {
		lab.t.Fatalf("cut %d->%d: %v", i, j, err)
	}
}

// heal undoes every cut.
func (lab *netLab) heal() {
	for i := range lab.ns {
		for j := range lab.ns {
			if i != j {
				_ = run("ip", "netns", "exec", lab.ns[i], "tc", "qdisc", "del", "dev", fmt.Sprintf("p%d", j+1), "root")
			}
		}
	}
}

// reachable reports whether member i can open a TCP connection to member
// j's peer port (a check that a cut really cuts).
func (lab *netLab) reachable(i, j int, peerAddr string) bool {
	host, port, _ := strings.Cut(peerAddr, ":")
	err := run("ip", "netns", "exec", lab.ns[i-1], "timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
	return err == nil
}

// TestPartition cuts and heals real links between three members in their
// own network namespaces: the leader isolated both ways, the leader able
// to receive but not send, and one follower unable to hear the leader.
func TestPartition(t *testing.T) {
	skipShort(t)
	lab := newNetLab(t, 3)
	var clientAddrs, peerAddrs []string
	for i := 1; i <= 3; i++ {
		clientAddrs = append(clientAddrs, fmt.Sprintf("10.213.%d.2:7700", i))
		peerAddrs = append(peerAddrs, fmt.Sprintf("10.214.0.%d:7701", i))
	}
	c := newCluster(t, clusterConfig{n: 3, clientAddrs: clientAddrs, peerAddrs: peerAddrs, netns: lab.ns,
		extraArgs: []string{"--tick", "50ms", "--election-ticks", "10"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.start(ctx)
	waitLeader(t, ctx, c)

	if !lab.reachable(1, 2, peerAddrs[1]) {
		t.Fatalf("n1 cannot reach n2's peer port before any cut")
	}
	lab.cut(1, 2)
	if lab.reachable(1, 2, peerAddrs[1]) {
		t.Fatalf("n1 still reaches n2 after cutting 1->2: the tc cut does not work here")
	}
	lab.heal()
	if !lab.reachable(1, 2, peerAddrs[1]) {
		t.Fatalf("n1 cannot reach n2 after heal")
	}

	idx := func(nd *node) int {
		for i, x := range c.nodes {
			if x == nd {
				return i + 1
			}
		}
		return 0
	}
	others := func(i int) []int {
		var out []int
		for j := 1; j <= 3; j++ {
			if j != i {
				out = append(out, j)
			}
		}
		return out
	}

	scenarios := []struct {
		name string
		cut  func(leader int)
	}{
		{"leader isolated both ways", func(l int) {
			for _, j := range others(l) {
				lab.cut(l, j)
				lab.cut(j, l)
			}
		}},
		{"leader cannot send (one way)", func(l int) {
			for _, j := range others(l) {
				lab.cut(l, j)
			}
		}},
	}
	for k, sc := range scenarios {
		old := waitLeader(t, ctx, c)
		l := idx(old)
		t.Logf("scenario %q: leader %s", sc.name, old.name)
		lock := fmt.Sprintf("part/%d", k)
		sessA := openSession(t, ctx, c.endpoints(), fmt.Sprintf("e2e/partition/a%d", k))
		sessB := openSession(t, ctx, c.endpoints(), fmt.Sprintf("e2e/partition/b%d", k))
		sc.cut(l)
		cutAt := time.Now()

		// The isolated old leader must not grant: its acquire can only
		// fail or time out, since it cannot commit.
		direct := newRouter([]string{old.clientAddr})
		acq := &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: sessA, Seq: 1, Secret: e2eSecret}, Name: lock}
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		cl, _ := direct.client(old.clientAddr)
		resp, err := cl.Acquire(actx, acq)
		acancel()
		if err == nil && resp.GetAcquired() {
			t.Errorf("%s: isolated old leader %s granted %s (token %d)", sc.name, old.name, lock, resp.GetToken())
		} else {
			t.Logf("%s: acquire on isolated %s: %v", sc.name, old.name, errOr(err, resp))
		}
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		if g, err := cl.Get(gctx, &batonpb.GetRequest{Name: lock}); err == nil {
			t.Errorf("%s: isolated old leader %s answered a linearizable Get: %v", sc.name, old.name, g)
		}
		gcancel()
		direct.close()

		// The majority elects a new leader and serves.
		var majority []string
		for _, j := range others(l) {
			majority = append(majority, c.nodes[j-1].clientAddr)
		}
		mr := newRouter(majority)
		var got *batonpb.AcquireResponse
		mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
		err = mr.do(mctx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			got, err = bc.Acquire(ctx, &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: sessB, Seq: 1, Secret: e2eSecret}, Name: lock})
			return err
		})
		mcancel()
		if err != nil || !got.GetAcquired() {
			t.Fatalf("%s: the majority did not grant %s to session %d: %v", sc.name, lock, sessB, errOr(err, got))
		}
		t.Logf("%s: majority granted %s token %d %v after the cut", sc.name, lock, got.GetToken(), time.Since(cutAt).Round(time.Millisecond))
		for _, j := range others(l) {
			st, err := c.nodes[j-1].status(ctx)
			if err == nil && st.LeaderAddr == old.clientAddr {
				t.Errorf("%s: %s still names the isolated %s as leader after a grant by the majority", sc.name, c.nodes[j-1].name, old.name)
			}
		}
		mr.close()

		lab.heal()
		waitConverged(t, ctx, c)
		// The session A's acquire (same seq) retried on the healed
		// cluster: whatever the old leader did, B holds the lock now.
		r := newRouter(c.endpoints())
		var again *batonpb.AcquireResponse
		err = r.do(ctx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			again, err = bc.Acquire(ctx, acq)
			return err
		})
		if err != nil || again.GetAcquired() {
			t.Errorf("%s: retry of A's acquire after heal: %v (B holds token %d)", sc.name, errOr(err, again), got.GetToken())
		}
		var g *batonpb.GetResponse
		err = r.do(ctx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			g, err = bc.Get(ctx, &batonpb.GetRequest{Name: lock})
			return err
		})
		if hs := g.GetLock().GetHolders(); err != nil || len(hs) != 1 || hs[0].GetSessionId() != sessB || hs[0].GetToken() != got.GetToken() {
			t.Errorf("%s: after heal Get %s = %v, %v; want holder session %d token %d", sc.name, lock, g, err, sessB, got.GetToken())
		}
		r.close()
	}

	// One way, follower side: a follower stops hearing the leader (but can
	// still send to it). The cluster must keep serving throughout.
	old := waitLeader(t, ctx, c)
	l := idx(old)
	f := others(l)[0]
	t.Logf("scenario \"follower cannot hear the leader\": leader %s, follower %s", old.name, c.nodes[f-1].name)
	lab.cut(l, f)
	sess := openSession(t, ctx, c.endpoints(), "e2e/partition/follower")
	r := newRouter(c.endpoints())
	defer r.close()
	start := time.Now()
	ops := 0
	for seq := uint64(1); time.Since(start) < 5*time.Second; seq += 2 {
		actx, acancel := context.WithTimeout(ctx, 15*time.Second)
		var got *batonpb.AcquireResponse
		err := r.do(actx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
			var err error
			got, err = bc.Acquire(ctx, &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: sess, Seq: seq, Secret: e2eSecret}, Name: "part/f"})
			return err
		})
		if err == nil && !got.GetAcquired() {
			err = fmt.Errorf("acquire of a free lock refused: %v", got)
		}
		if err == nil {
			ops++
			err = r.do(actx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
				_, err := bc.Release(ctx, &batonpb.ReleaseRequest{Header: &batonpb.RequestHeader{SessionId: sess, Seq: seq + 1, Secret: e2eSecret}, Name: "part/f", Token: got.GetToken()})
				return err
			})
		}
		acancel()
		if err != nil {
			t.Fatalf("follower one-way cut: the cluster stopped serving: %v", err)
		}
	}
	t.Logf("follower cannot hear the leader: %d acquire+release pairs in 5s", ops)
	lab.heal()
	waitConverged(t, ctx, c)
}

func errOr(err error, v any) any {
	if err != nil {
		return err
	}
	return v
}

// e2eSecret is the secret of the sessions these tests open over the
// unary API.
const e2eSecret = "e2e-test-session-secret-0"

// openSession opens a 30s session through any member.
func openSession(t testing.TB, ctx context.Context, endpoints []string, owner string) uint64 {
	t.Helper()
	r := newRouter(endpoints)
	defer r.close()
	var resp *batonpb.OpenSessionResponse
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := r.do(octx, nil, 2*time.Second, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		resp, err = bc.OpenSession(ctx, &batonpb.OpenSessionRequest{Ttl: durationpb.New(30 * time.Second), Owner: owner, Secret: e2eSecret})
		return err
	})
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	return resp.GetSessionId()
}
