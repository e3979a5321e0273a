package embed

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/testnet"
)

// testCluster runs n in-process members on loopback, each with its own
// data dir, so members can be stopped and restarted from disk.
type testCluster struct {
	t       *testing.T
	cfgs    []Config
	members []*Member
}

func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, nil)
}

// newTestClusterWith is newTestCluster with each member's configuration
// changed by adjust (when not nil) before it starts.
func newTestClusterWith(t *testing.T, n int, adjust func(i int, cfg *Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, cfgs: make([]Config, n), members: make([]*Member, n)}
	var parts []string
	for i := range n {
		cfg := DefaultConfig()
		cfg.Name = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = t.TempDir()
		cfg.ClientListener, cfg.PeerListener = listen(t), listen(t)
		cfg.ClientAddr, cfg.PeerAddr = cfg.ClientListener.Addr().String(), cfg.PeerListener.Addr().String()
		cfg.TickInterval = 20 * time.Millisecond
		cfg.ElectionTicks = 10
		cfg.SnapshotEntries = 50 // exercise snapshots and compaction
		parts = append(parts, cfg.Name+"="+cfg.PeerAddr)
		c.cfgs[i] = cfg
	}
	for i := range c.cfgs {
		c.cfgs[i].InitialCluster = strings.Join(parts, ",")
		if adjust != nil {
			adjust(i, &c.cfgs[i])
		}
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
	})
	return c
}

// listen binds a loopback port the member's first start takes over.
// Restarts bind the address again; testnet keeps it out of the range the
// kernel hands to outgoing connections, so nothing else takes it meanwhile.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := testnet.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		c.members[i], err = Start(c.cfgs[i])
		// The listeners serve the first start only; Close closes them.
		c.cfgs[i].ClientListener, c.cfgs[i].PeerListener = nil, nil
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old sockets are closing
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", c.cfgs[i].Name, err)
	}
}

func (c *testCluster) stop(i int) {
	if c.members[i] != nil {
		c.members[i].Close()
		c.members[i] = nil
	}
}

// waitLeader waits until every running member agrees on one leader and
// that leader has applied its own term's first entry; it returns its index.
func (c *testCluster) waitLeader() int {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		lead := -1
		agree := true
		var leadID uint64
		for i, m := range c.members {
			if m == nil {
				continue
			}
			st := m.Node().Status()
			if leadID == 0 {
				leadID = st.Leader
			}
			if st.Leader == 0 || st.Leader != leadID {
				agree = false
			}
			if m.Node().IsLeader() {
				lead = i
			}
		}
		if agree && lead >= 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.members[lead].Node().ReadBarrier(ctx)
			cancel()
			if err == nil {
				return lead
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader agreed within 10s")
	return -1
}

func (c *testCluster) client(i int) batonpb.BatonClient {
	c.t.Helper()
	conn, err := grpc.NewClient(c.members[i].ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return batonpb.NewBatonClient(conn)
}

// waitApplied waits until every running member has applied as far as the
// furthest one and returns their state hashes.
func (c *testCluster) waitConverged() map[string]string {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hashes := map[string]string{}
		var max, min uint64 = 0, ^uint64(0)
		for i, m := range c.members {
			if m == nil {
				continue
			}
			a := m.Node().Status().Applied
			max, min = maxU(max, a), minU(min, a)
			m.Node().View(func(fm *fsm.Machine) { hashes[c.cfgs[i].Name] = fm.Hash() })
		}
		same := true
		var first string
		for _, h := range hashes {
			if first == "" {
				first = h
			}
			same = same && h == first
		}
		if min == max && same {
			return hashes
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("members did not converge: applied %d..%d, hashes %v", min, max, hashes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

// testSecret is the secret of every session these tests open over the
// unary API (tests of strangers choose another).
const testSecret = "embed-test-session-secret"

func hdr(session, seq uint64) *batonpb.RequestHeader {
	return &batonpb.RequestHeader{SessionId: session, Seq: seq, Secret: testSecret}
}

// openSession opens a session on cl, the leader's client. It retries
// while the leader answers NOT_LEADER naming itself, as a new cluster's
// leader does until it has raised the log version (an open carries a
// secret's hash).
func openSession(t *testing.T, cl batonpb.BatonClient, owner string, ttl time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := cl.OpenSession(context.Background(), &batonpb.OpenSessionRequest{Ttl: durationpb.New(ttl), Owner: owner, Secret: testSecret})
		if err == nil {
			return resp.GetSessionId()
		}
		if code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("open session %s: %v", owner, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// channelStream is one session on channel 1 of a Sessions stream, read
// as a stream of its own.
type channelStream struct {
	gs     batonpb.Baton_SessionsClient
	queued []*batonpb.ChannelResponse
}

func openChannelStream(ctx context.Context, cl batonpb.BatonClient) (*channelStream, error) {
	gs, err := cl.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	return &channelStream{gs: gs}, nil
}

func (c *channelStream) Send(r *batonpb.SessionRequest) error {
	return c.gs.Send(&batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 1, Request: r}}})
}

// Recv returns the channel's next response; its end is an error.
func (c *channelStream) Recv() (*batonpb.SessionResponse, error) {
	for len(c.queued) == 0 {
		msg, err := c.gs.Recv()
		if err != nil {
			return nil, err
		}
		c.queued = msg.GetResponses()
	}
	cr := c.queued[0]
	c.queued = c.queued[1:]
	if e := cr.GetEnd(); e != nil {
		return nil, fmt.Errorf("channel ended: %v", e.GetError())
	}
	return cr.GetResponse(), nil
}

// queue starts a waiting acquire on a session's channel and returns once
// the server answered "queued"; grants arrive on the returned channel.
func queue(t *testing.T, cl batonpb.BatonClient, session uint64, name string) <-chan *batonpb.Grant {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := openChannelStream(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: session, Secret: testSecret}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || r.GetError() != nil {
		t.Fatalf("resume: %v %v", err, r.GetError())
	}
	if err := st.Send(&batonpb.SessionRequest{Id: 2, Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{
		Header: hdr(session, 1), Name: name, Wait: true,
	}}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	for err == nil && r.GetId() == 0 {
		r, err = st.Recv() // a push (the holds that follow a resume), not the answer
	}
	if err != nil || r.GetError() != nil || !r.GetAcquire().GetQueued() {
		t.Fatalf("acquire %s by %d: want queued, got %v %v", name, session, r, err)
	}
	grants := make(chan *batonpb.Grant, 1)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			if g := r.GetGrant(); g != nil {
				grants <- g
				return
			}
		}
	}()
	return grants
}

func TestLeaderFailoverKeepsHoldsAndQueue(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	cl := c.client(lead)
	ctx := context.Background()

	a := openSession(t, cl, "a", 30*time.Second)
	b := openSession(t, cl, "b", 30*time.Second)
	d := openSession(t, cl, "d", 30*time.Second)
	held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "job"})
	if err != nil || !held.GetAcquired() {
		t.Fatalf("acquire by a: %v %v", held, err)
	}
	queue(t, cl, b, "job")
	queue(t, cl, d, "job")
	// Many more entries than SnapshotEntries, so followers snapshot and
	// compact before the failover.
	for i := range 120 {
		name := fmt.Sprintf("filler/%d", i)
		r, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, uint64(2+i)), Name: name})
		if err != nil || !r.GetAcquired() {
			t.Fatalf("acquire %s: %v %v", name, r, err)
		}
	}

	c.stop(lead)
	lead2 := c.waitLeader()
	if lead2 == lead {
		t.Fatal("stopped member still leads")
	}
	cl2 := c.client(lead2)
	got, err := cl2.Get(ctx, &batonpb.GetRequest{Name: "job"})
	if err != nil {
		t.Fatal(err)
	}
	l := got.GetLock()
	if len(l.GetHolders()) != 1 || l.GetHolders()[0].GetSessionId() != a || l.GetHolders()[0].GetToken() != held.GetToken() {
		t.Fatalf("after failover holder = %v, want session %d token %d", l.GetHolders(), a, held.GetToken())
	}
	if len(l.GetWaiters()) != 2 || l.GetWaiters()[0].GetSessionId() != b || l.GetWaiters()[1].GetSessionId() != d {
		t.Fatalf("after failover waiters = %v, want [%d %d]", l.GetWaiters(), b, d)
	}

	// The queue still works under the new leader: a's release hands the
	// lock to b, with a larger token, and to nobody else.
	grantB := queueGrantWatch(t, cl2, b)
	if _, err := cl2.Release(ctx, &batonpb.ReleaseRequest{Header: hdr(a, 200), Name: "job", Token: held.GetToken()}); err != nil {
		t.Fatal(err)
	}
	g := <-grantB
	if g.GetToken() <= held.GetToken() {
		t.Fatalf("token after handoff %d, want > %d", g.GetToken(), held.GetToken())
	}
	got, err = cl2.Get(ctx, &batonpb.GetRequest{Name: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if hs := got.GetLock().GetHolders(); len(hs) != 1 || hs[0].GetSessionId() != b || hs[0].GetToken() != g.GetToken() {
		t.Fatalf("holder after release = %v, want b with token %d", hs, g.GetToken())
	}

	// The old leader comes back and catches up; then every member restarts
	// from disk and all agree on the same state.
	c.start(lead)
	before := c.waitConverged()
	for i := range c.members {
		c.stop(i)
	}
	for i := range c.members {
		c.start(i)
	}
	c.waitLeader()
	after := c.waitConverged()
	for name, h := range after {
		if h != before[name] {
			t.Fatalf("%s: state after restart %s, before %s", name, h, before[name])
		}
	}
}

// queueGrantWatch resumes session on a new stream (the old streams died
// with the old leader) and re-asks acquire seq 1, which reports the
// current outcome; grants arrive on the channel.
func queueGrantWatch(t *testing.T, cl batonpb.BatonClient, session uint64) <-chan *batonpb.Grant {
	t.Helper()
	return queue(t, cl, session, "job")
}

func TestExpiredSessionHandsLockToNextWaiter(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(c.waitLeader())
	ctx := context.Background()
	const ttl = time.Second
	a := openSession(t, cl, "silent", ttl)
	b := openSession(t, cl, "waiter", 30*time.Second)
	held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"})
	if err != nil || !held.GetAcquired() {
		t.Fatal(err)
	}
	// a's last sign of life: a keepalive received now.
	lastBeat := time.Now()
	if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: a, Secret: testSecret}); err != nil {
		t.Fatal(err)
	}
	grants := queue(t, cl, b, "x")
	g := <-grants
	after := time.Since(lastBeat)
	t.Logf("lock passed %v after the last keepalive (ttl %v)", after, ttl)
	if after < ttl {
		t.Fatalf("lock passed after %v, before the TTL %v ran out", after, ttl)
	}
	if g.GetToken() <= held.GetToken() {
		t.Fatalf("new token %d, want > %d", g.GetToken(), held.GetToken())
	}
	if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: a, Secret: testSecret}); err == nil {
		t.Fatal("keepalive of an expired session succeeded")
	}
}

// acquireEach has session a acquire n locks named prefix/0.. (seq from
// firstSeq) and adds their tokens to tokens.
func acquireEach(t *testing.T, cl batonpb.BatonClient, a uint64, prefix string, n int, firstSeq uint64, tokens map[string]uint64) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("%s/%d", prefix, i)
		r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(a, firstSeq+uint64(i)), Name: name})
		if err != nil || !r.GetAcquired() {
			t.Fatalf("acquire %s: %v %v", name, r, err)
		}
		tokens[name] = r.GetToken()
	}
}

// checkHolds fails unless each lock in tokens has one holder, with its
// token.
func checkHolds(t *testing.T, cl batonpb.BatonClient, tokens map[string]uint64) {
	t.Helper()
	for name, tok := range tokens {
		got, err := cl.Get(context.Background(), &batonpb.GetRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if hs := got.GetLock().GetHolders(); len(hs) != 1 || hs[0].GetToken() != tok {
			t.Fatalf("%s: %v, want token %d", name, hs, tok)
		}
	}
}

// TestRetiredSessionStreamIsRefused is what a client too old to speak
// Sessions sees: UNIMPLEMENTED, with a message that names the fix.
func TestRetiredSessionStreamIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	cl := c.client(c.waitLeader())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cl.Session(ctx)
	if err == nil {
		_, err = st.Recv()
	}
	if code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "Baton/Session was retired") ||
		!strings.Contains(err.Error(), "use a client that speaks Sessions") {
		t.Fatalf("a Session stream: %v; want UNIMPLEMENTED naming Sessions", err)
	}
}
