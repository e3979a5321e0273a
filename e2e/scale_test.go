package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

var (
	scale         = flag.Bool("e2e.scale", false, "run TestScale (minutes of load; CI runs TestScale100kLocks, a tenth of it)")
	scaleSessions = flag.Int("e2e.scale-sessions", 100_000, "sessions TestScale opens")
	scaleLocks    = flag.Int("e2e.scale-locks", 1_000_000, "locks TestScale holds, spread over the sessions")
	scaleSnap     = flag.Int("e2e.scale-snapshot-entries", 0, "servers' --snapshot-entries in TestScale (0: their default)")
	scaleLoad     = flag.Duration("e2e.scale-load", 15*time.Second, "TestScale: how long 32 workers acquire and release locks at the scale point, to show the latency a snapshot of that state costs (0: skip)")
	scaleProfile  = flag.String("e2e.scale-profile", "", "TestScale: start the servers with --pprof and save each member's heap profile, MemStats, peak resident memory and log into this directory")
)

// TestScale loads a 3-node cluster of real processes with the issue-5
// scale point (1,000,000 held locks over 100,000 sessions, every session
// kept alive by a keepalive), reports each member's resident memory, then
// kill -9s every member, restarts them and reports the time until the
// cluster serves a linearizable read again.
//
//	go test ./e2e -run 'TestScale$' -e2e.scale -v
func TestScale(t *testing.T) {
	skipShort(t)
	if !*scale {
		t.Skip("load test; run with -e2e.scale (TestScale100kLocks runs a tenth of it without)")
	}
	runScale(t, scalePoint{sessions: *scaleSessions, locks: *scaleLocks, snapshotEntries: *scaleSnap, load: *scaleLoad, profile: *scaleProfile})
}

// TestScale100kLocks is TestScale at a tenth of the scale point (100,000
// held locks over 10,000 sessions), without the load phase: every test
// run checks that a cluster holds that state, keeps it alive, and serves
// it again after kill -9 of every member.
func TestScale100kLocks(t *testing.T) {
	skipShort(t)
	runScale(t, scalePoint{sessions: 10_000, locks: 100_000})
}

// scalePoint is the state runScale builds and what it does with it.
type scalePoint struct {
	sessions, locks int
	snapshotEntries int           // the servers' --snapshot-entries (0: their default)
	load            time.Duration // loadAtScale's run (0: none)
	profile         string        // a directory for heap profiles and logs ("": none)
}

// runScale opens p.sessions sessions on a new 3-node cluster, each
// holding its share of p.locks, keeps every session alive once, then
// kill -9s every member and restarts them. It checks that every lock was
// granted and that the members agree on the counts before the kill and
// after the restart; it logs the time each step took and resident memory.
func runScale(t *testing.T, p scalePoint) {
	addrs := freeLoopbackAddrs(t, 6)
	var extra []string
	if p.snapshotEntries > 0 {
		extra = []string{"--snapshot-entries", strconv.Itoa(p.snapshotEntries)}
	}
	if p.profile != "" {
		extra = append(extra, "--pprof")
	}
	c := newCluster(t, clusterConfig{n: 3, clientAddrs: addrs[:3], peerAddrs: addrs[3:], extraArgs: extra})
	ctx := context.Background()
	c.start(ctx)
	var peaks *peakRSS
	if p.profile != "" {
		peaks = watchPeakRSS(c)
		defer saveLogs(t, c, p.profile)
	}
	lead := waitLeader(t, ctx, c)
	conn, err := grpc.NewClient(lead.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := batonpb.NewBatonClient(conn)

	nSess, perSession := p.sessions, p.locks/p.sessions
	ids := make([]uint64, nSess)
	start := time.Now()
	parallel(t, nSess, func(i int) error {
		r, err := cl.OpenSession(ctx, &batonpb.OpenSessionRequest{Ttl: durationpb.New(10 * time.Minute), Owner: fmt.Sprintf("scale/%d", i), Secret: e2eSecret})
		ids[i] = r.GetSessionId()
		return err
	})
	t.Logf("opened %d sessions in %v", nSess, time.Since(start))
	start = time.Now()
	parallel(t, nSess, func(i int) error {
		names := make([]string, perSession)
		for j := range names {
			names[j] = fmt.Sprintf("inventory/row/%d", i*perSession+j)
		}
		r, err := cl.AcquireMany(ctx, &batonpb.AcquireManyRequest{Header: &batonpb.RequestHeader{SessionId: ids[i], Seq: 1, Secret: e2eSecret}, Names: names})
		if err != nil {
			return err
		}
		if len(r.GetResults()) != perSession {
			return fmt.Errorf("session %d: %d results for %d names", ids[i], len(r.GetResults()), perSession)
		}
		for j, res := range r.GetResults() {
			if !res.GetAcquired() {
				return fmt.Errorf("session %d: %s not acquired", ids[i], names[j])
			}
		}
		return nil
	})
	t.Logf("acquired %d locks in %v", nSess*perSession, time.Since(start))
	// Settle first: a member publishes its status at the end of a Ready,
	// a moment after it answered the requests that Ready applied.
	waitConverged(t, ctx, c)
	before, err := lead.status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkScaleCounts(t, "after loading", before, nSess, nSess*perSession)
	start = time.Now()
	parallel(t, nSess, func(i int) error {
		_, err := cl.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: ids[i], Secret: e2eSecret})
		return err
	})
	st, err := lead.status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %d sessions alive in %v; commit index %s before, %s after (keepalives are not logged)",
		nSess, time.Since(start), before.CommitIndex, st.CommitIndex)
	t.Logf("leader %s: commit %s, %d sessions, %d locks", lead.name, st.CommitIndex, st.Sessions, st.Locks)
	waitConverged(t, ctx, c)
	for _, nd := range c.nodes {
		t.Logf("%s resident memory: %d MiB", nd.name, rssMiB(t, nd))
	}
	if p.profile != "" {
		for _, nd := range c.nodes {
			t.Logf("%s peak resident memory while loading: %d MiB", nd.name, peaks.stop(nd))
			saveHeapProfile(t, ctx, nd, p.profile)
		}
	}

	if p.load > 0 {
		loadAtScale(t, ctx, cl, lead, ids[:32], p.load)
	}

	for _, nd := range c.nodes {
		nd.kill()
	}
	start = time.Now()
	for _, nd := range c.nodes {
		if err := nd.start(c.bin); err != nil {
			t.Fatal(err)
		}
	}
	lead = waitLeader(t, ctx, c)
	conn2, err := grpc.NewClient(lead.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	cl2 := batonpb.NewBatonClient(conn2)
	for {
		g, err := cl2.Get(ctx, &batonpb.GetRequest{Name: "inventory/row/0"})
		if err == nil && len(g.GetLock().GetHolders()) == 1 {
			break
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("not serving 5 minutes after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after kill -9 of all members: serving a linearizable read %v after restart", time.Since(start))
	waitConverged(t, ctx, c)
	after, err := lead.status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkScaleCounts(t, "after kill -9 and restart", after, nSess, nSess*perSession)
	for _, nd := range c.nodes {
		t.Logf("%s resident memory after restart: %d MiB", nd.name, rssMiB(t, nd))
	}
}

// checkScaleCounts fails t unless st counts sessions and locks (a load
// phase's locks are released again, so it adds none).
func checkScaleCounts(t *testing.T, when string, st *statusJSON, sessions, locks int) {
	t.Helper()
	if st.Sessions != sessions || st.Locks != locks {
		t.Errorf("%s: %s reports %d sessions and %d locks, want %d and %d", when, st.Name, st.Sessions, st.Locks, sessions, locks)
	}
}

// loadAtScale has one worker per session acquire and release a lock of its
// own for d, and logs the latency of the acquires and how many snapshots
// the leader took meanwhile: with the default 100,000 entries between
// snapshots at least one falls in a 15 s run. It measures; it asserts
// nothing about time.
func loadAtScale(t *testing.T, ctx context.Context, cl batonpb.BatonClient, lead *node, sessions []uint64, d time.Duration) {
	snapsBefore := metric(t, lead, "baton_snapshots_total")
	pauseBefore := metric(t, lead, "baton_snapshot_apply_pause_nanoseconds_total")
	lat := make([][]time.Duration, len(sessions))
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i, id := range sessions {
		wg.Go(func() {
			name := fmt.Sprintf("scale/load/%d", i)
			for seq := uint64(2); time.Now().Before(end); seq += 2 {
				t0 := time.Now()
				a, err := cl.Acquire(ctx, &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: id, Seq: seq, Secret: e2eSecret}, Name: name})
				if err == nil && !a.GetAcquired() {
					err = fmt.Errorf("%s not acquired", name)
				}
				if err != nil {
					failed.Store(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
				_, err = cl.Release(ctx, &batonpb.ReleaseRequest{Header: &batonpb.RequestHeader{SessionId: id, Seq: seq + 1, Secret: e2eSecret}, Name: name, Token: a.GetToken()})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("load at scale: %v", err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	t.Logf("load at scale: %d acquire+release cycles by %d workers in %v (%.0f/s); acquire p50 %v, p99 %v, p99.9 %v, max %v; leader snapshots %d, apply pause %v",
		len(all), len(sessions), d, float64(len(all))/d.Seconds(), q(0.5), q(0.99), q(0.999), all[len(all)-1],
		metric(t, lead, "baton_snapshots_total")-snapsBefore,
		time.Duration(metric(t, lead, "baton_snapshot_apply_pause_nanoseconds_total")-pauseBefore))
}

// metric returns the value of a counter or gauge on nd's /metrics.
func metric(t *testing.T, nd *node, name string) uint64 {
	resp, err := http.Get("http://" + nd.clientAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			n, err := strconv.ParseFloat(v, 64) // large values come as 1.5e+06
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return uint64(n)
		}
	}
	t.Fatalf("metric %s not on %s/metrics", name, nd.clientAddr)
	return 0
}

// parallel runs f(0..n-1) on 64 goroutines and fails t on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, fmt.Errorf("item %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		t.Fatal(err)
	}
}

func rssMiB(t *testing.T, nd *node) int {
	kb := vmRSSKiB(nd)
	if kb < 0 {
		t.Fatalf("%s: no resident memory to read", nd.name)
	}
	return kb / 1024
}

// vmRSSKiB is the resident memory of the process nd runs, or -1.
func vmRSSKiB(nd *node) int {
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if cmd == nil {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	return -1
}

// peakRSS samples every member's resident memory until stop, so a run
// shows the highest figure reached, not only the one at the end.
type peakRSS struct {
	mu   sync.Mutex
	peak map[*node]int
	done chan struct{}
	once sync.Once
}

func watchPeakRSS(c *cluster) *peakRSS {
	p := &peakRSS{peak: make(map[*node]int), done: make(chan struct{})}
	go func() {
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tk.C:
			}
			for _, nd := range c.nodes {
				if kb := vmRSSKiB(nd); kb > 0 {
					p.mu.Lock()
					p.peak[nd] = max(p.peak[nd], kb/1024)
					p.mu.Unlock()
				}
			}
		}
	}()
	return p
}

// stop ends the sampling (the first call) and returns nd's peak in MiB.
func (p *peakRSS) stop(nd *node) int {
	p.once.Do(func() { close(p.done) })
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.peak[nd], vmRSSKiB(nd)/1024)
}

// saveHeapProfile writes nd's MemStats and heap profile (as of its last
// collection) into dir, then one taken after a forced collection.
func saveHeapProfile(t *testing.T, ctx context.Context, nd *node, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, _ := nd.status(ctx)
	role := "unknown"
	if st != nil {
		role = st.Role
	}
	for _, f := range []struct{ query, file string }{
		{"debug=1", nd.name + "-" + role + "-heap.txt"},
		{"", nd.name + "-" + role + "-heap.pb.gz"},
		// Last, as it collects first: what is live, exactly.
		{"gc=1", nd.name + "-" + role + "-heap-live.pb.gz"},
	} {
		resp, err := http.Get("http://" + nd.clientAddr + "/debug/pprof/heap?" + f.query)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s (%s): heap profile in %s", nd.name, role, dir)
}

// saveLogs copies every member's log into dir (the cluster's own go with
// its temporary directory).
func saveLogs(t *testing.T, c *cluster, dir string) {
	for _, nd := range c.nodes {
		if b, err := os.ReadFile(nd.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(dir, nd.name+".log"), b, 0o644)
		}
	}
}
