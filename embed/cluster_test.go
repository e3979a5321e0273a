package embed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/fsm"
)

// snapshotOften makes members snapshot and compact their logs every 50
// entries, so that the tests here exercise both.
var snapshotOften = embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.SnapshotEntries = 50 })

// startCluster starts n members (embedtest). They listen on real ports,
// so the test skips under -short.
func startCluster(t *testing.T, n int, opts ...embedtest.Option) *embedtest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts members on real ports; runs without -short")
	}
	return embedtest.New(t, n, opts...)
}

// startInMemory starts n members on a network in memory
// (embedtest.InMemory), reached through c.Dial. Inside a testing/synctest
// bubble they run on the bubble's clock, so a test checks their deadlines
// exactly. It takes no port and runs under -short.
func startInMemory(t *testing.T, n int, opts ...embedtest.Option) *embedtest.Cluster {
	t.Helper()
	return embedtest.New(t, n, append(opts, embedtest.InMemory())...)
}

// waitConverged waits until every running member has applied the same
// entries to the same state, and returns their state hashes by name.
func waitConverged(t *testing.T, c *embedtest.Cluster) map[string]string {
	t.Helper()
	var hashes map[string]string
	embedtest.WaitFor(t, 10*time.Second, "the running members to apply the same entries to the same state", func() bool {
		hashes = map[string]string{}
		states := map[string]bool{}
		for _, i := range c.Running() {
			embed.RaftNode(c.Member(i)).View(func(fm *fsm.Machine) {
				hashes[c.Config(i).Name] = fm.Hash()
				states[fmt.Sprintf("%d/%s", fm.AppliedIndex(), fm.Hash())] = true
			})
		}
		return len(states) == 1
	})
	return hashes
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
	var id uint64
	embedtest.WaitFor(t, 10*time.Second, "session "+owner+" to open", func() bool {
		resp, err := cl.OpenSession(context.Background(), &batonpb.OpenSessionRequest{Ttl: durationpb.New(ttl), Owner: owner, Secret: testSecret})
		if err != nil && code(err) != codes.Unavailable {
			t.Fatalf("open session %s: %v", owner, err)
		}
		id = resp.GetSessionId()
		return err == nil
	})
	return id
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
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
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

	c.Stop(lead)
	lead2 := c.WaitLeader()
	if lead2 == lead {
		t.Fatal("stopped member still leads")
	}
	cl2 := c.Client(lead2)
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
	c.Start(lead)
	before := waitConverged(t, c)
	for i := range c.Len() {
		c.Stop(i)
	}
	for i := range c.Len() {
		c.Start(i)
	}
	c.WaitLeader()
	after := waitConverged(t, c)
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

// TestExpiredSessionHandsLockToNextWaiter: a session's keepalives, one
// every TTL/3 for several TTLs, each move its deadline to when it was
// received + TTL; once they stop, the session expires then, on synctest's
// clock exactly, and its lock passes to the next waiter with a larger
// token.
func TestExpiredSessionHandsLockToNextWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 1, snapshotOften)
		cl := c.Client(c.WaitLeader())
		ctx := context.Background()
		const ttl = time.Second
		a := openSession(t, cl, "silent", ttl)
		b := openSession(t, cl, "waiter", 30*time.Second)
		held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"})
		if err != nil || !held.GetAcquired() {
			t.Fatal(err)
		}
		grants := queue(t, cl, b, "x")
		var lastBeat time.Time
		for range 7 {
			time.Sleep(ttl / 3)
			lastBeat = time.Now()
			if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: a, Secret: testSecret}); err != nil {
				t.Fatalf("keepalive %v after the last: %v", ttl/3, err)
			}
		}
		g := <-grants
		if after := time.Since(lastBeat); after != ttl {
			t.Fatalf("lock passed %v after the last keepalive, want at the TTL, %v", after, ttl)
		}
		if g.GetToken() <= held.GetToken() {
			t.Fatalf("new token %d, want > %d", g.GetToken(), held.GetToken())
		}
		if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: a, Secret: testSecret}); err == nil {
			t.Fatal("keepalive of an expired session succeeded")
		}
	})
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
	c := startCluster(t, 1, snapshotOften)
	cl := c.Client(c.WaitLeader())
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
