package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func TestPrefixOf(t *testing.T) {
	for _, tt := range []struct {
		name  string
		depth int
		want  string
	}{
		{"jobs/42", 1, "jobs/"},
		{"jobs/a/b", 1, "jobs/"},
		{"jobs/a/b", 2, "jobs/a/"},
		{"jobs/42", 2, "jobs/"}, // fewer segments: up to the last '/'
		{"jobs/a/b", 5, "jobs/a/"},
		{"flat", 1, NoPrefix},
		{"/root", 1, "/"},
		{"a//b", 2, "a//"},
	} {
		t.Run(fmt.Sprintf("%s@%d", tt.name, tt.depth), func(t *testing.T) {
			if got := prefixOf(tt.name, tt.depth); got != tt.want {
				t.Fatalf("prefixOf(%q, %d) = %q, want %q", tt.name, tt.depth, got, tt.want)
			}
		})
	}
}

// machine applies commands to a state machine and hands each result to
// lock metrics, as the Ready loop and Deliver do.
type machine struct {
	t     *testing.T
	m     *fsm.Machine
	lm    *lockMetrics
	index uint64
	wall  int64 // the proposing leader's clock, advanced by the test
}

func newMachine(t *testing.T, depth int) *machine {
	mc := &machine{t: t, m: fsm.New(), wall: time.Unix(1000, 0).UnixNano()}
	mc.lm = newLockMetrics(depth, func(f func(*fsm.Machine)) { f(mc.m) })
	return mc
}

func (mc *machine) apply(cmd *fsmpb.Command) *fsmpb.Result {
	mc.index++
	cmd.WallTimeUnixNano = mc.wall
	res := mc.m.Apply(mc.index, cmd)
	mc.lm.applied(mc.index, cmd, res)
	mc.lm.flushed()
	return res
}

func (mc *machine) open() uint64 {
	return mc.apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "o", TtlNanos: int64(time.Minute)}}}).GetSessionId()
}

func acquireCmd(s, seq uint64, lock string) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: lock}}}
}

func releaseCmd(s, seq uint64, lock string, token uint64) *fsmpb.Command {
	return &fsmpb.Command{SessionId: s, Seq: seq, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: lock, Token: token}}}
}

func observations(t *testing.T, o prometheus.Observer) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestLockMetricsCountEachEntryOnce: a grant is counted by the entry that
// made it, not by a retry answered from the exactly-once cache nor by a
// reentrant acquire; a hold is timed once, when its last count goes; a
// close ends its session's holds without counting an expiry; the leader's
// own refused commands are no client's refusal.
func TestLockMetricsCountEachEntryOnce(t *testing.T) {
	mc := newMachine(t, 1)
	a, b := mc.open(), mc.open()
	jobs := mc.lm.series("jobs/1")
	token := mc.apply(acquireCmd(a, 1, "jobs/1")).GetAcquire().GetToken()
	mc.apply(acquireCmd(a, 1, "jobs/1")) // a retry
	mc.apply(acquireCmd(a, 2, "jobs/1")) // reentrant: count 2
	mc.apply(acquireCmd(b, 1, "web/x"))
	if got := testutil.ToFloat64(jobs.grants); got != 1 {
		t.Errorf("jobs/ grants: %v, want 1", got)
	}
	mc.wall += int64(3 * time.Second)
	mc.apply(releaseCmd(a, 3, "jobs/1", token)) // count 1 left
	if n, _ := observations(t, jobs.holdTime); n != 0 {
		t.Errorf("a hold with a count left was timed")
	}
	mc.apply(releaseCmd(a, 4, "jobs/1", token))
	mc.apply(releaseCmd(a, 4, "jobs/1", token)) // a retry
	if n, sum := observations(t, jobs.holdTime); n != 1 || sum != 3 {
		t.Errorf("jobs/ holds timed: %d, %vs; want 1 of 3s", n, sum)
	}
	if res := mc.apply(releaseCmd(a, 5, "jobs/1", token)); res.GetError() != fsmpb.Error_ERROR_LOCK_NOT_FOUND {
		t.Fatalf("release of a free lock: %v", res)
	}
	// The leader's timeout of a wait that is gone: refused, not counted.
	mc.apply(&fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: "jobs/1", SessionId: a, AcquireSeq: 9, TimedOut: true}}})
	if got := testutil.ToFloat64(mc.lm.refusals.WithLabelValues("jobs/", "LOCK_NOT_FOUND")); got != 1 {
		t.Errorf("LOCK_NOT_FOUND refusals of jobs/: %v, want 1", got)
	}
	if got := testutil.CollectAndCount(mc.lm.refusals); got != 1 {
		t.Errorf("%d refusal series, want the one", got)
	}
	mc.apply(&fsmpb.Command{SessionId: b, Seq: 2, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}})
	web := mc.lm.series("web/x")
	if n, sum := observations(t, web.holdTime); n != 1 || sum != 3 {
		t.Errorf("web/ holds timed at the close: %d, %vs; want 1 of 3s", n, sum)
	}
	if got := testutil.ToFloat64(web.expiries[expirySession]); got != 0 {
		t.Errorf("a close counted as %v expiries", got)
	}
}

// TestLockMetricsReentryAtGrant: a session that waits twice for a lock
// under one owner key gets one hold at the grant, its second wait a count
// of it (reenterWaits): one grant counted, one hold timed when its
// session closes, both waits ended.
func TestLockMetricsReentryAtGrant(t *testing.T) {
	mc := newMachine(t, 1)
	mc.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: fsm.LogVersion}}})
	a, b := mc.open(), mc.open()
	token := mc.apply(acquireCmd(a, 1, "jobs/1")).GetAcquire().GetToken()
	for seq := uint64(1); seq <= 2; seq++ {
		wait := acquireCmd(b, seq, "jobs/1")
		wait.GetAcquire().Wait = true
		if st := mc.apply(wait).GetAcquire().GetStatus(); st != fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED {
			t.Fatalf("wait %d: %v, want QUEUED", seq, st)
		}
	}
	res := mc.apply(releaseCmd(a, 2, "jobs/1", token))
	if g := res.GetGrants(); len(g) != 2 || g[0].GetReentry() || !g[1].GetReentry() {
		t.Fatalf("grants of the release: %v, want a hold and its re-entry", g)
	}
	jobs := mc.lm.series("jobs/1")
	if got := testutil.ToFloat64(jobs.grants); got != 2 {
		t.Errorf("jobs/ grants: %v, want 2 (a's, and b's one hold)", got)
	}
	mc.wall += int64(5 * time.Second)
	mc.apply(&fsmpb.Command{SessionId: b, Seq: 3, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}})
	if n, sum := observations(t, jobs.holdTime); n != 2 || sum != 5 {
		t.Errorf("jobs/ holds timed: %d, %vs; want a's (0s) and b's (5s)", n, sum)
	}
}

// TestLockMetricsSeeded: holds granted before the metrics existed (a
// restart, a snapshot received) are filled in from the state at the first
// Flush, with the since the state keeps, and an expiry of their session
// counts them.
func TestLockMetricsSeeded(t *testing.T) {
	mc := newMachine(t, 1)
	lm := mc.lm
	mc.lm = newLockMetrics(1, func(f func(*fsm.Machine)) {}) // sees nothing yet
	a := mc.open()
	mc.apply(acquireCmd(a, 1, "jobs/1"))
	mc.apply(acquireCmd(a, 2, "jobs/2"))
	mc.lm = lm
	mc.open() // the first batch lm sees: it fills its table at its end
	mc.wall += int64(time.Minute)
	mc.apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: a}}})
	jobs := lm.series("jobs/1")
	if got := testutil.ToFloat64(jobs.expiries[expirySession]); got != 2 {
		t.Errorf("jobs/ session expiries: %v, want the 2 holds", got)
	}
	if n, sum := observations(t, jobs.holdTime); n != 2 || sum != 120 {
		t.Errorf("jobs/ holds timed: %d, %vs; want 2 of a minute", n, sum)
	}
}

// TestLockMetricsPrefixBound: the first MaxMetricPrefixes prefixes get
// series of their own, the rest share OtherPrefix's; depth 0 labels none.
func TestLockMetricsPrefixBound(t *testing.T) {
	mc := newMachine(t, 1)
	a := mc.open()
	for i := range MaxMetricPrefixes + 5 {
		mc.apply(acquireCmd(a, uint64(i+1), fmt.Sprintf("p%d/x", i)))
	}
	if got := testutil.CollectAndCount(mc.lm.grants); got != MaxMetricPrefixes+1 {
		t.Errorf("%d grant series, want %d and other", got, MaxMetricPrefixes)
	}
	if got := testutil.ToFloat64(mc.lm.grants.WithLabelValues(OtherPrefix)); got != 5 {
		t.Errorf("other grants: %v, want 5", got)
	}
	// The scrape's gauges: one per prefix with a hold, other included.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(mc.lm)
	if n, err := testutil.GatherAndCount(reg, "baton_lock_oldest_hold_seconds"); err != nil || n != MaxMetricPrefixes+1 {
		t.Errorf("%d oldest-hold series (%v), want %d", n, err, MaxMetricPrefixes+1)
	}

	flat := newMachine(t, 0)
	s := flat.open()
	flat.apply(acquireCmd(s, 1, "jobs/1"))
	flat.apply(acquireCmd(s, 2, "web/1"))
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(flat.lm)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP baton_lock_grants_total holds granted, at once or to a waiter
# TYPE baton_lock_grants_total counter
baton_lock_grants_total 2
# HELP baton_lock_longest_queue waiters of the lock with the most
# TYPE baton_lock_longest_queue gauge
baton_lock_longest_queue 0
`), "baton_lock_grants_total", "baton_lock_longest_queue"); err != nil {
		t.Error(err)
	}
}

// BenchmarkLockMetricsCycle is what lock metrics add to the Ready loop
// for an acquire and its release: a grant counted, a hold noted, and
// timed at its end.
func BenchmarkLockMetricsCycle(b *testing.B) {
	lm := newLockMetrics(1, func(f func(*fsm.Machine)) {})
	lm.flushed()
	acq, rel := acquireCmd(1, 1, "jobs/1"), releaseCmd(1, 2, "jobs/1", 0)
	res := &fsmpb.Result{Acquire: &fsmpb.AcquireOutcome{Lock: "jobs/1", Status: fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED}}
	done := &fsmpb.Result{}
	index := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		index++
		res.Acquire.Token = index
		lm.applied(index, acq, res)
		rel.GetRelease().Token = index
		index++
		lm.applied(index, rel, done)
	}
}

// BenchmarkCollectLoads is a scrape's walk of every lock for the oldest
// hold and the longest queue of each prefix.
func BenchmarkCollectLoads(b *testing.B) {
	for _, n := range []int{1000, 1000000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			// n locks of 10 prefixes, held by sessions of at most
			// fsm.MaxHoldsPerSession holds each.
			m := fsm.New()
			var index, session uint64
			for i := range n {
				if i%fsm.MaxHoldsPerSession == 0 {
					index++
					session = index
					m.Apply(index, &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "bench"}}})
				}
				index++
				res := m.Apply(index, &fsmpb.Command{SessionId: session, Seq: uint64(i%fsm.MaxHoldsPerSession + 1), WallTimeUnixNano: int64(i + 1),
					Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: fmt.Sprintf("p%d/%08d", i%10, i)}}})
				if err := fsm.ErrorOf(res); err != nil {
					b.Fatal(err)
				}
			}
			lm := newLockMetrics(1, func(f func(*fsm.Machine)) { f(m) })
			ch := make(chan prometheus.Metric, 64)
			go func() {
				for range ch {
				}
			}()
			b.ReportAllocs()
			for b.Loop() {
				lm.collectLoads(ch)
			}
			close(ch)
		})
	}
}
