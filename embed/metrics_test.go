package embed_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestLockMetricsAfterAScript runs a scripted workload on a 3-member
// cluster and checks the lock metrics and their labels on every member:
// the grants, expiries (a session's, a blacklisted session's, a hold
// limit's), the conditional release and the refusal by prefix and
// reason, and the observations of the hold and wait histograms; the
// oldest hold and the longest queue; the Raft latency histograms. The
// state machine's decisions are counted alike on every member; waits
// only by the leader that received the acquires.
func TestLockMetricsAfterAScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startInMemory(t, 3)
		lead := c.WaitLeader()
		cl := c.Client(lead)
		ctx := context.Background()
		a := openSession(t, cl, "a", time.Minute)
		b := openSession(t, cl, "b", time.Minute)
		x := openSession(t, cl, "x", time.Second) // no keepalives: expires
		y := openSession(t, cl, "y", time.Second) // blacklisted, then expires
		seqs := map[uint64]uint64{}
		acquire := func(ctx context.Context, s uint64, name string, wait bool, holdLimit time.Duration) (*batonpb.AcquireResponse, error) {
			seqs[s]++
			r := &batonpb.AcquireRequest{Header: hdr(s, seqs[s]), Name: name, Wait: wait}
			if holdLimit > 0 {
				r.HoldLimit = durationpb.New(holdLimit)
			}
			return cl.Acquire(ctx, r)
		}
		mustAcquire := func(s uint64, name string, holdLimit time.Duration) uint64 {
			t.Helper()
			r, err := acquire(ctx, s, name, false, holdLimit)
			if err != nil || !r.GetAcquired() {
				t.Fatalf("acquire %s by %d: %v %v", name, s, r, err)
			}
			return r.GetToken()
		}
		release := func(s uint64, name string, token uint64) error {
			seqs[s]++
			_, err := cl.Release(ctx, &batonpb.ReleaseRequest{Header: hdr(s, seqs[s]), Name: name, Token: token})
			return err
		}
		// waitFor acquires name for b in the background, once it is
		// queued behind its holder; done is closed once it is granted.
		var wg sync.WaitGroup
		waitFor := func(ctx context.Context, name string) {
			seqs[b]++
			r := &batonpb.AcquireRequest{Header: hdr(b, seqs[b]), Name: name, Wait: true}
			wg.Go(func() {
				if resp, err := cl.Acquire(ctx, r); ctx.Err() == nil && (err != nil || !resp.GetAcquired()) {
					t.Errorf("b's wait for %s: %v %v", name, resp, err)
				}
			})
			synctest.Wait() // queued: the call blocks on its grant
		}

		jobs1 := mustAcquire(a, "jobs/1", 0)
		jobs2 := mustAcquire(a, "jobs/2", 0)
		web := mustAcquire(a, "web/a", 0)
		waitFor(ctx, "jobs/1")
		if err := release(a, "jobs/1", jobs1); err != nil { // to b
			t.Fatal(err)
		}
		wg.Wait()
		if r, err := acquire(ctx, a, "jobs/1", false, 0); err != nil || r.GetAcquired() { // busy
			t.Fatalf("try of b's jobs/1: %v %v", r, err)
		}
		if err := release(a, "jobs/2", jobs2+1); code(err) != codes.FailedPrecondition { // TOKEN_MISMATCH
			t.Fatalf("release with another token: %v", err)
		}
		if _, err := cl.CasRelease(ctx, &batonpb.CasReleaseRequest{Name: "web/a", SessionId: a, Token: web}); err != nil {
			t.Fatal(err)
		}
		mustAcquire(x, "tmp/x", 0)
		mustAcquire(y, "bl/y", 0)
		if _, err := cl.Blacklist(ctx, &batonpb.BlacklistRequest{SessionId: y}); err != nil {
			t.Fatal(err)
		}
		mustAcquire(a, "lim/z", time.Second)
		waitFor(ctx, "tmp/x")
		waitFor(ctx, "bl/y")
		waitFor(ctx, "lim/z")
		wg.Wait() // x and y expired, a's hold of lim/z passed its limit
		// A wait left queued for the scrape.
		waitCtx, cancelWait := context.WithCancel(ctx)
		seqs[a]++
		wg.Go(func() {
			cl.Acquire(waitCtx, &batonpb.AcquireRequest{Header: hdr(a, seqs[a]), Name: "jobs/1", Wait: true})
		})
		synctest.Wait()
		waitConverged(t, c)

		grants := map[string]float64{"jobs/": 3, "web/": 1, "tmp/": 2, "bl/": 2, "lim/": 2}
		holds := map[string]uint64{"jobs/": 1, "web/": 1, "tmp/": 1, "bl/": 1, "lim/": 1}
		for i := range 3 {
			fams := scrape(t, c, i)
			name := c.Config(i).Name
			for _, tt := range []struct {
				family string
				labels map[string]string
				want   float64
			}{
				{"baton_lock_cas_releases_total", map[string]string{"prefix": "web/"}, 1},
				{"baton_lock_cas_releases_total", map[string]string{"prefix": "jobs/"}, 0},
				{"baton_lock_expiries_total", map[string]string{"prefix": "tmp/", "reason": "session_expired"}, 1},
				{"baton_lock_expiries_total", map[string]string{"prefix": "bl/", "reason": "blacklisted"}, 1},
				{"baton_lock_expiries_total", map[string]string{"prefix": "bl/", "reason": "session_expired"}, 0},
				{"baton_lock_expiries_total", map[string]string{"prefix": "lim/", "reason": "hold_limit"}, 1},
				{"baton_lock_expiries_total", map[string]string{"prefix": "jobs/", "reason": "session_expired"}, 0},
				{"baton_lock_refusals_total", map[string]string{"prefix": "jobs/", "reason": "TOKEN_MISMATCH"}, 1},
				{"baton_lock_oldest_hold_seconds", map[string]string{"prefix": "web/"}, 0},
				{"baton_lock_longest_queue", map[string]string{"prefix": "jobs/"}, 1},
				{"baton_lock_longest_queue", map[string]string{"prefix": "tmp/"}, 0},
			} {
				if got, ok := sample(fams, tt.family, tt.labels); !ok || got != tt.want {
					t.Errorf("%s: %s%v is %v (shown: %v), want %v", name, tt.family, tt.labels, got, ok, tt.want)
				}
			}
			if got := labelValues(fams, "baton_lock_grants_total", "prefix"); len(got) != len(grants) {
				t.Errorf("%s: grants by prefix %v, want %v", name, got, grants)
			}
			for p, want := range grants {
				if got, _ := sample(fams, "baton_lock_grants_total", map[string]string{"prefix": p}); got != want {
					t.Errorf("%s: %s grants: %v, want %v", name, p, got, want)
				}
			}
			for p, want := range holds {
				if got := histogramCount(fams, "baton_lock_hold_seconds", map[string]string{"prefix": p}); got != want {
					t.Errorf("%s: %d holds of %s timed, want %d", name, got, p, want)
				}
			}
			if age, _ := sample(fams, "baton_lock_oldest_hold_seconds", map[string]string{"prefix": "jobs/"}); age < 1 {
				t.Errorf("%s: the oldest hold of jobs/ (a's jobs/2, from before the expiries) is %vs old", name, age)
			}
			// The hold limit of 1 s passed unrenewed, by the leader's clock.
			if h := histogram(fams, "baton_lock_hold_seconds", map[string]string{"prefix": "lim/"}); h.GetSampleSum() < 1 || h.GetSampleSum() > 2 {
				t.Errorf("%s: lim/z held for %vs, want its 1 s limit", name, h.GetSampleSum())
			}
			for _, f := range []string{"baton_raft_fsync_duration_seconds", "baton_raft_apply_duration_seconds"} {
				if histogramCount(fams, f, nil) == 0 {
					t.Errorf("%s: %s has no observation", name, f)
				}
			}
			waits := map[string]uint64{}
			if i == lead {
				// a's jobs/1 and jobs/2 and b's jobs/1; each other
				// prefix's two; and a's try of jobs/1, busy.
				waits = map[string]uint64{"jobs/": 3, "web/": 1, "tmp/": 2, "bl/": 2, "lim/": 2}
				if got := histogramCount(fams, "baton_lock_wait_seconds", map[string]string{"prefix": "jobs/", "outcome": "not_granted"}); got != 1 {
					t.Errorf("leader: %d acquires of jobs/ not granted, want the busy try", got)
				}
				if histogramCount(fams, "baton_raft_commit_duration_seconds", nil) == 0 {
					t.Error("leader: no commit timed")
				}
			}
			for p := range grants {
				if got := histogramCount(fams, "baton_lock_wait_seconds", map[string]string{"prefix": p, "outcome": "granted"}); got != waits[p] {
					t.Errorf("%s: %d acquires of %s granted after a wait timed, want %d", name, got, p, waits[p])
				}
			}
			if v, _ := sample(fams, "baton_leader_changes_total", nil); v < 1 {
				t.Errorf("%s: saw %v leader changes", name, v)
			}
			if i == lead {
				checkDocsMetrics(t, fams)
			}
		}
		cancelWait()
		wg.Wait()
	})
}

// scrape reads member i's /metrics.
func scrape(t *testing.T, c *embedtest.Cluster, i int) map[string]*dto.MetricFamily {
	t.Helper()
	conn, err := c.Dial(context.Background(), c.ClientAddr(i))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	text := httpGet(t, conn, "/metrics")
	_, body, _ := strings.Cut(text, "\n") // the status line
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics of member %d: %v", i, err)
	}
	return fams
}

// metricIn is the value of the series name, without labels, in text (a
// /metrics answer), and whether text has it.
func metricIn(text, name string) (float64, bool) {
	_, body, _ := strings.Cut(text, "\n")
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return 0, false
	}
	return sample(fams, name, nil)
}

// find is the series of family with exactly labels (nil: none).
func find(fams map[string]*dto.MetricFamily, family string, labels map[string]string) *dto.Metric {
	for _, m := range fams[family].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// sample is the value of a counter or gauge series, and whether it is shown.
func sample(fams map[string]*dto.MetricFamily, family string, labels map[string]string) (float64, bool) {
	m := find(fams, family, labels)
	switch {
	case m == nil:
		return 0, false
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	}
	return m.GetUntyped().GetValue(), true
}

func histogram(fams map[string]*dto.MetricFamily, family string, labels map[string]string) *dto.Histogram {
	return find(fams, family, labels).GetHistogram()
}

func histogramCount(fams map[string]*dto.MetricFamily, family string, labels map[string]string) uint64 {
	return histogram(fams, family, labels).GetSampleCount()
}

// labelValues are the values label takes in family.
func labelValues(fams map[string]*dto.MetricFamily, family, label string) []string {
	var out []string
	for _, m := range fams[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	return out
}
