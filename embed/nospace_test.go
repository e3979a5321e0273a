package embed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// fakeDisk is a DiskSpace whose free space the test sets.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) Free() (uint64, bool) { return d.free.Load(), true }

// TestNoSpace: while the leader's data dir has less than MinFreeDisk
// free, a new open or acquire is refused with RESOURCE_EXHAUSTED and
// NO_SPACE (HTTP 429; the Go client's ErrNoSpace) naming the free bytes,
// the threshold and the flag, while what holds, frees or reads is served:
// a retry of an answered open or acquire, a waiter resent on a new
// stream, keepalives, reads, releases (granting the waiter) and closes.
// A refused acquire's seq is settled in the log, so the same request
// arriving again (an earlier attempt, delayed) takes nothing. The lock
// held before stays held until released. When space is back,
// the member takes new work again without a restart. Before, the only
// outcome of a full disk was the member stopping (issue 23).
func TestNoSpace(t *testing.T) {
	const minFree = 1 << 30
	disk := &fakeDisk{}
	disk.free.Store(2 << 30)
	c := startCluster(t, 1, snapshotOften, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.MinFreeDisk, cfg.DiskSpace = minFree, disk }))
	// Opens with a nonce need the log version the new leader raises
	// after its election (until then the member answers NOT_LEADER).
	c.WaitLeader()
	addr := c.ClientAddr(0)
	api := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(nonce uint64) (uint64, error) {
		resp, err := api.OpenSession(ctx, &batonpb.OpenSessionRequest{Ttl: durationpb.New(time.Minute), Owner: "disk", Nonce: nonce, Secret: testSecret})
		return resp.GetSessionId(), err
	}
	acquire := func(session, seq uint64, name string) (*batonpb.AcquireResponse, error) {
		// min_unacked_seq 1: the retry of seq 1 below stays answerable
		// (each refusal's seq fence moves the window as the request says).
		return api.Acquire(ctx, &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: session, Seq: seq, MinUnackedSeq: 1, Secret: testSecret}, Name: name})
	}
	noSpace := func(what string, err error) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || reasonOf(st) != batonpb.Reason_NO_SPACE.String() {
			t.Fatalf("%s with the disk low: %v (reason %q), want RESOURCE_EXHAUSTED, NO_SPACE", what, err, reasonOf(st))
		}
		for _, want := range []string{"104857600 bytes", "1073741824 bytes", "--min-free-disk"} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("%s: message %q does not name %q", what, st.Message(), want)
			}
		}
	}

	// Before: s1 holds "held", s2 waits for it on a stream, and a Go
	// client has a session.
	s1, err := open(1)
	if err != nil {
		t.Fatal(err)
	}
	first, err := acquire(s1, 1, "held")
	if err != nil || !first.GetAcquired() {
		t.Fatalf("acquire held: %v, %v", first, err)
	}
	s2, err := open(2)
	if err != nil {
		t.Fatal(err)
	}
	waiter := attachStream(t, ctx, api, s2)
	if r := waiter.call(t, acquireOnStream(s2, 1, "held")); r.GetError() != nil || !r.GetAcquire().GetQueued() {
		t.Fatalf("s2's acquire of held: %v, want queued", r)
	}
	cl, err := baton.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	gs, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}

	disk.free.Store(100 << 20)
	// Refused: whatever is new.
	_, err = open(3)
	noSpace("an open", err)
	_, err = acquire(s1, 2, "new")
	noSpace("an acquire", err)
	_, err = api.AcquireMany(ctx, &batonpb.AcquireManyRequest{Header: &batonpb.RequestHeader{SessionId: s1, Seq: 3, MinUnackedSeq: 1, Secret: testSecret}, Names: []string{"m1", "m2"}})
	noSpace("an acquire of many", err)
	if _, err := cl.NewSession(ctx); !errors.Is(err, baton.ErrNoSpace) {
		t.Fatalf("the Go client's NewSession: %v, want ErrNoSpace", err)
	}
	if _, err := gs.Mutex("new").TryLock(ctx); !errors.Is(err, baton.ErrNoSpace) {
		t.Fatalf("the Go client's TryLock (on its stream): %v, want ErrNoSpace", err)
	}
	for _, h := range []struct{ path, body string }{
		{"/v1/sessions", `{"ttl":"60s"}`},
		{"/v1/locks/acquire", fmt.Sprintf(`{"header":{"session_id":"%d","seq":"4","min_unacked_seq":"1","secret":%q},"name":"new"}`, s1, testSecret)},
	} {
		resp, err := http.Post("http://"+addr+h.path, "application/json", strings.NewReader(h.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("POST %s with the disk low: %s, want 429", h.path, resp.Status)
		}
	}

	// Shown: in the member's status (the Go client's too) and metrics.
	checkDisk(t, ctx, api, 100<<20, minFree, true)
	if st, err := cl.Status(ctx); err != nil || !st.LowDisk || st.DiskFree != 100<<20 || !st.DiskFreeKnown || st.MinFreeDisk != minFree {
		t.Fatalf("the Go client's Status: %+v, %v", st, err)
	}
	metrics := httpGet(t, dial(t, c), "/metrics")
	for name, want := range map[string]float64{"baton_disk_free_bytes": 100 << 20, "baton_disk_free_bytes_limit": minFree,
		"baton_disk_low": 1, "baton_no_space_refused_total": 7} {
		if got, ok := metricIn(metrics, name); got != want {
			t.Errorf("/metrics: %s is %v (shown: %v), want %v", name, got, ok, want)
		}
	}

	// Served: retries of what the log has, and what holds, reads or frees.
	if id, err := open(1); err != nil || id != s1 {
		t.Fatalf("retried open of session %d: %d, %v", s1, id, err)
	}
	if r, err := acquire(s1, 1, "held"); err != nil || r.GetToken() != first.GetToken() {
		t.Fatalf("retried acquire: %v, %v; want token %d", r, err, first.GetToken())
	}
	waiter.close()
	waiter = attachStream(t, ctx, api, s2)
	if r := waiter.call(t, acquireOnStream(s2, 1, "held")); r.GetError() != nil || !r.GetAcquire().GetQueued() {
		t.Fatalf("s2's acquire resent on a new stream: %v, want queued", r)
	}
	if _, err := api.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: s1, Secret: testSecret}); err != nil {
		t.Fatalf("keepalive: %v", err)
	}
	if held, err := cl.Check(ctx, "held", first.GetToken()); err != nil || !held {
		t.Fatalf("check of the hold taken before: %v, %v", held, err)
	}
	if _, err := api.Release(ctx, &batonpb.ReleaseRequest{Header: &batonpb.RequestHeader{SessionId: s1, Seq: 5, MinUnackedSeq: 1, Secret: testSecret}, Name: "held", Token: first.GetToken()}); err != nil {
		t.Fatalf("release: %v", err)
	}
	grant := waiter.push(t).GetGrant()
	if grant.GetName() != "held" || grant.GetToken() <= first.GetToken() {
		t.Fatalf("s2's grant after the release: %v", grant)
	}
	if held, err := cl.Check(ctx, "held", first.GetToken()); err != nil || held {
		t.Fatalf("check of the released hold: %v, %v", held, err)
	}
	if _, err := api.CloseSession(ctx, &batonpb.CloseSessionRequest{SessionId: s2, Secret: testSecret}); err != nil {
		t.Fatalf("close: %v", err)
	}
	if info, err := cl.Get(ctx, "held"); err != nil || len(info.Holders) != 0 {
		t.Fatalf("held after its holder closed: %+v, %v; want free", info, err)
	}
	if err := gs.Close(ctx); err != nil {
		t.Fatalf("the Go client's close: %v", err)
	}

	// Space is back: new work again, without a restart.
	disk.free.Store(minFree)
	checkDisk(t, ctx, api, minFree, minFree, false)
	if metrics := httpGet(t, dial(t, c), "/metrics"); !strings.Contains(metrics, "baton_disk_low 0\n") {
		t.Error("/metrics lacks baton_disk_low 0 with space back")
	}
	// The refusal settled its seq in the log first (a seq fence): an
	// earlier attempt of that acquire, arriving only now (delayed on
	// another connection), is refused and takes nothing.
	_, err = acquire(s1, 2, "new")
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "refused before it reached the log") {
		t.Fatalf("an acquire refused for space, arriving again with space back: %v, want FAILED_PRECONDITION, refused before the log", err)
	}
	if info, err := cl.Get(ctx, "new"); err != nil || len(info.Holders) != 0 {
		t.Fatalf("lock new after its refused acquire came again: %+v, %v; want free", info, err)
	}
	s3, err := open(6)
	if err != nil {
		t.Fatalf("open with space back: %v", err)
	}
	if r, err := acquire(s3, 1, "new"); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire with space back: %v, %v", r, err)
	}
	gs, err = cl.NewSession(ctx)
	if err != nil {
		t.Fatalf("the Go client's NewSession with space back: %v", err)
	}
	if _, err := gs.Mutex("held").TryLock(ctx); err != nil {
		t.Fatalf("the Go client's TryLock with space back: %v", err)
	}
}

// TestNoSpaceFollower: every member reports its own disk, and only the
// leader's refuses: a follower with a low disk does not keep the cluster
// from new work, a leader with one does.
func TestNoSpaceFollower(t *testing.T) {
	const minFree = 1 << 30
	disks := make([]*fakeDisk, 3)
	c := startCluster(t, 3, snapshotOften, embedtest.Configure(func(i int, cfg *embed.Config) {
		disks[i] = &fakeDisk{}
		disks[i].free.Store(2 << 30)
		cfg.MinFreeDisk, cfg.DiskSpace = minFree, disks[i]
	}))
	lead := c.WaitLeader()
	follower := (lead + 1) % 3
	disks[follower].free.Store(1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	checkDisk(t, ctx, c.Client(follower), 1<<20, minFree, true)
	checkDisk(t, ctx, c.Client(lead), 2<<30, minFree, false)
	cl, err := baton.Dial(ctx, c.Endpoints(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatalf("NewSession with a follower's disk low: %v", err)
	}
	if _, err := s.Mutex("x").TryLock(ctx); err != nil {
		t.Fatalf("TryLock with a follower's disk low: %v", err)
	}
	disks[lead].free.Store(1 << 20)
	if _, err := s.Mutex("y").TryLock(ctx); !errors.Is(err, baton.ErrNoSpace) {
		t.Fatalf("TryLock with the leader's disk low: %v, want ErrNoSpace", err)
	}
}

// checkDisk checks what a member's Status says of its disk.
func checkDisk(t *testing.T, ctx context.Context, api batonpb.BatonClient, free, minFree uint64, low bool) {
	t.Helper()
	st, err := api.Status(ctx, &batonpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.DiskFreeBytes == nil || st.GetDiskFreeBytes() != free || st.GetMinFreeDiskBytes() != minFree || st.GetLowDisk() != low {
		t.Fatalf("%s's status: disk free %v, min free %d, low %v; want %d, %d, %v",
			st.GetName(), st.DiskFreeBytes, st.GetMinFreeDiskBytes(), st.GetLowDisk(), free, minFree, low)
	}
}

// testStream is one session's channel, read by the test.
type testStream struct {
	stream *channelStream
	cancel context.CancelFunc
	nextID uint64
}

// attachStream resumes session on a new Sessions stream.
func attachStream(t *testing.T, ctx context.Context, api batonpb.BatonClient, session uint64) *testStream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	st, err := openChannelStream(ctx, api)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ts := &testStream{stream: st, cancel: cancel}
	t.Cleanup(ts.close)
	resume := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: session, Secret: testSecret}}}
	if r := ts.call(t, resume); r.GetError() != nil || r.GetOpen() == nil {
		t.Fatalf("resume of session %d: %v", session, r)
	}
	return ts
}

// call sends r and returns its answer, skipping pushes.
func (ts *testStream) call(t *testing.T, r *batonpb.SessionRequest) *batonpb.SessionResponse {
	t.Helper()
	ts.nextID++
	r.Id = ts.nextID
	if err := ts.stream.Send(r); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := ts.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() == r.Id {
			return resp
		}
	}
}

// push returns the next push other than a resume's list of holds.
func (ts *testStream) push(t *testing.T) *batonpb.SessionResponse {
	t.Helper()
	for {
		resp, err := ts.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() == 0 && resp.GetHolds() == nil {
			return resp
		}
	}
}

func (ts *testStream) close() { ts.cancel() }

func acquireOnStream(session, seq uint64, name string) *batonpb.SessionRequest {
	return &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{
		Header: &batonpb.RequestHeader{SessionId: session, Seq: seq}, Name: name, Wait: true,
	}}}
}
