package embed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// A member that was down while the others compacted their logs past it
// must catch up from a snapshot (MsgSnap), not from entries.
func TestLaggingMemberCatchesUpFromSnapshot(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	down := (lead + 1) % 3
	c.Stop(down)
	cl := c.Client(lead)
	a := openSession(t, cl, "a", 30*time.Second)
	// 4x SnapshotEntries: the live members snapshot and compact past
	// everything the stopped member has.
	for i := range 200 {
		r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(a, uint64(i+1)), Name: fmt.Sprintf("k/%d", i)})
		if err != nil || !r.GetAcquired() {
			t.Fatalf("acquire %d: %v %v", i, r, err)
		}
	}
	// A snapshot counts once saved, which no longer holds applies back:
	// the last acquire can return before the save of the last snapshot.
	embedtest.WaitFor(t, 10*time.Second, "the leader to save a snapshot", func() bool {
		return embed.RaftNode(c.Member(lead)).Metrics().Snapshots > 0
	})
	c.Start(down)
	waitConverged(t, c)
}

// Blacklisting a session refuses its keepalives and acquires; the session
// then expires on its own, a TTL after its last keepalive (on synctest's
// clock exactly), and its lock passes to the next waiter.
func TestBlacklistEvictsThroughExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 1, snapshotOften)
		cl := c.Client(c.WaitLeader())
		ctx := context.Background()
		const ttl = time.Second
		stuck := openSession(t, cl, "stuck", ttl)
		next := openSession(t, cl, "next", 30*time.Second)
		held, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(stuck, 1), Name: "row"})
		if err != nil || !held.GetAcquired() {
			t.Fatal(err)
		}
		time.Sleep(ttl / 2)
		lastBeat := time.Now()
		if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: stuck, Secret: testSecret}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Blacklist(ctx, &batonpb.BlacklistRequest{SessionId: stuck}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: stuck, Secret: testSecret}); err == nil {
			t.Fatal("keepalive of a blacklisted session succeeded")
		}
		if _, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(stuck, 2), Name: "other"}); err == nil {
			t.Fatal("acquire by a blacklisted session succeeded")
		}
		// The hold is not force-deleted: it stays until the session expires.
		got, err := cl.Get(ctx, &batonpb.GetRequest{Name: "row"})
		if err != nil || len(got.GetLock().GetHolders()) != 1 {
			t.Fatalf("hold after blacklist: %v %v", got, err)
		}
		g := <-queue(t, cl, next, "row")
		if after := time.Since(lastBeat); after != ttl {
			t.Fatalf("lock passed %v after the last keepalive, want at the TTL, %v", after, ttl)
		}
		if g.GetToken() <= held.GetToken() {
			t.Fatalf("token %d after eviction, want > %d", g.GetToken(), held.GetToken())
		}
	})
}

// Oversized requests are refused before they reach consensus.
func TestOversizedRequestRefused(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	cl := c.Client(c.WaitLeader())
	names := make([]string, 0, 2100)
	for i := range cap(names) {
		names = append(names, fmt.Sprintf("%0500d", i))
	}
	// ~1.05 MB: over the 1 MiB request limit, refused by gRPC unread.
	_, err := cl.AcquireMany(context.Background(), &batonpb.AcquireManyRequest{Header: hdr(1, 1), Names: names})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v, want ResourceExhausted", err)
	}
	st := c.Member(0).Status()
	if st.Applied > 3 {
		t.Fatalf("something was applied: %+v", st)
	}
}

// A 5-member cluster keeps serving with two members down.
func TestFiveMembersSurviveTwoFailures(t *testing.T) {
	c := startCluster(t, 5, snapshotOften)
	lead := c.WaitLeader()
	c.Stop(lead)
	c.Stop((lead + 1) % 5)
	lead = c.WaitLeader()
	cl := c.Client(lead)
	a := openSession(t, cl, "a", 30*time.Second)
	r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"})
	if err != nil || !r.GetAcquired() {
		t.Fatalf("acquire with 3 of 5: %v %v", r, err)
	}
}

// A retried acquire (same session and seq) gets the first answer and never
// becomes a second, reentrant hold.
func TestRetriedAcquireIsExactlyOnce(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	cl := c.Client(c.WaitLeader())
	ctx := context.Background()
	a := openSession(t, cl, "a", 30*time.Second)
	req := &batonpb.AcquireRequest{Header: hdr(a, 1), Name: "x"}
	first, err := cl.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetToken() != first.GetToken() || again.GetCount() != 1 {
		t.Fatalf("retry answered %v, first %v", again, first)
	}
	got, err := cl.Get(ctx, &batonpb.GetRequest{Name: "x"})
	if err != nil || got.GetLock().GetHolders()[0].GetCount() != 1 {
		t.Fatalf("count after retry: %v %v", got, err)
	}
	// A real second acquire (new seq) is reentrant: count 2.
	second, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: hdr(a, 2), Name: "x"})
	if err != nil || second.GetCount() != 2 || second.GetToken() != first.GetToken() {
		t.Fatalf("reentrant acquire: %v %v", second, err)
	}
}

// /metrics shows the batching counters in the Prometheus text format.
func TestMetricsEndpoint(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	cl := c.Client(c.WaitLeader())
	openSession(t, cl, "a", 30*time.Second)
	resp, err := http.Get("http://" + c.ClientAddr(0) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"baton_is_leader 1", "baton_sessions 1", "# TYPE baton_fsyncs_total counter", "baton_propose_batches_total ", "baton_go_heap_objects_bytes ", "baton_process_resident_bytes "} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
}

// A member whose disk was lost (its data dir wiped) and that is started
// again under its old name must not count in the majority: the entries it
// acknowledged may have been what made them committed. The leader still
// knows how far it had acknowledged, and the member stops with
// ErrLogLost when it hears that (raft panics there; the member stops
// instead of the process). The others keep serving every hold.
func TestMemberWithLostDiskStops(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 20, 1, tokens)
	waitConverged(t, c) // the member to wipe acknowledged it all
	lost := (lead + 1) % 3
	c.Stop(lost)
	if err := os.RemoveAll(c.Config(lost).DataDir); err != nil {
		t.Fatal(err)
	}
	c.Start(lost)
	wiped := c.Member(lost)
	select {
	case <-wiped.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a member that lost its log still runs")
	}
	if !errors.Is(wiped.Err(), embed.ErrLogLost) {
		t.Fatalf("member stopped with %v, want ErrLogLost", wiped.Err())
	}
	c.Stop(lost)
	waitConverged(t, c)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(a, 100), Name: "after"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire with two of three: %v %v", r, err)
	}
}

// An offline way back for a member that lost its disk (membership
// changes are the online one: remove it, add a new member): stop the
// others, copy the data dir of the one that led, start all three. The leader's log holds every
// committed entry and is at least as up to date as any member's, so two
// copies of it make a majority that never forgets an acknowledged entry.
func TestLostDiskReplacedByTheLeadersCopy(t *testing.T) {
	c := startCluster(t, 3, snapshotOften)
	lead := c.WaitLeader()
	cl := c.Client(lead)
	a := openSession(t, cl, "a", time.Minute)
	tokens := map[string]uint64{}
	acquireEach(t, cl, a, "k", 120, 1, tokens) // past SnapshotEntries: the copy has a snapshot
	lost := (lead + 1) % 3
	c.Stop(lost)
	if err := os.RemoveAll(c.Config(lost).DataDir); err != nil {
		t.Fatal(err)
	}
	// The other two go on without it for a while.
	acquireEach(t, cl, a, "two", 10, 200, tokens)
	c.Stop((lead + 2) % 3)
	c.Stop(lead)
	if err := os.CopyFS(c.Config(lost).DataDir, os.DirFS(c.Config(lead).DataDir)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.Start(i)
	}
	c.WaitLeader()
	waitConverged(t, c)
	// The copy counts in a majority: with the old leader gone, the other
	// two still have every hold.
	c.Stop(lead)
	lead = c.WaitLeader()
	cl = c.Client(lead)
	checkHolds(t, cl, tokens)
	if r, err := cl.Acquire(context.Background(), &batonpb.AcquireRequest{Header: hdr(a, 300), Name: "after"}); err != nil || !r.GetAcquired() {
		t.Fatalf("acquire after the replacement: %v %v", r, err)
	}
}
