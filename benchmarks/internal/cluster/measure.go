package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/internal/bench"
)

// Run is one measured run of `baton bench` on a fresh cluster.
type Run struct {
	Workload string // own, hot, zipf, batch or hold
	Workers  int
	Conns    int // `baton bench --conns`: the clients the workers' sessions are spread over
	// Warmup is a `baton bench` of the same workload before the measured
	// one, on the same cluster; Duration is the measured one's.
	Warmup, Duration time.Duration
	BasePort         int      // as Start takes it
	ServerArgs       []string // added to every `baton server`
	Keep             bool     // keep the cluster's data directory and logs
	// LeaderFirst gives `baton bench` the leader's address first. A
	// client connects to the first endpoint and then to the leader, and
	// keeps both connections: with the leader first, every client's two
	// connections (the session framing and an idle gRPC one) are on the
	// leader whichever member won the election, instead of one or two.
	LeaderFirst bool
	// ExcludeSetup takes out of the CPU per cycle what the measured
	// `baton bench` costs the members besides its window: connecting its
	// clients and opening and closing its sessions. A run of the same
	// clients with an empty window, between the warm-up and the measured
	// run, measures that cost. Without it the CPU read covers the whole
	// measured process, a share that grows with the number of sessions.
	ExcludeSetup bool
}

// Measurement is what one Run measured.
type Measurement struct {
	Report            bench.Report
	CPUPerCycle       time.Duration // the three members' CPU per cycle; 0 if unknown
	LeaderCPUPerCycle time.Duration // the leader's alone; 0 if unknown
	// SetupExcluded says the run had Run.ExcludeSetup; SetupCPU and
	// LeaderSetupCPU are then the three members' and the leader's CPU for
	// the run with an empty window, taken out of the figures per cycle
	// (/proc counts in ticks of 10 ms: a small setup may read as 0).
	SetupExcluded            bool
	SetupCPU, LeaderSetupCPU time.Duration
}

func (m Measurement) String() string {
	us := func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
	s := fmt.Sprintf("%9.0f cycles/s  acquire p50 %6.2f ms  p99 %6.2f ms  servers' CPU/cycle %s (leader %s)  errors %d",
		m.Report.CyclesPerSec, m.Report.AcquireP50, m.Report.AcquireP99, us(m.CPUPerCycle), us(m.LeaderCPUPerCycle), m.Report.Errors)
	if m.SetupExcluded {
		s += fmt.Sprintf("  setup excluded: servers %.0f ms (leader %.0f ms)", float64(m.SetupCPU)/1e6, float64(m.LeaderSetupCPU)/1e6)
	}
	return s
}

// Measure starts a fresh cluster of b in dir, warms it up, runs the
// workload with b's own `baton bench`, reads the members' CPU around the
// measured run, and stops the cluster. dir is removed afterwards unless
// r.Keep or the run failed.
func Measure(ctx context.Context, b Build, r Run, dir string) (m Measurement, err error) {
	c, err := Start(ctx, b, dir, r.BasePort, r.ServerArgs...)
	defer func() {
		if c != nil {
			c.Stop()
		}
		if err != nil {
			err = fmt.Errorf("%w (the members' logs are in %s)", err, dir)
		} else if !r.Keep {
			os.RemoveAll(dir)
		}
	}()
	if err != nil {
		return m, err
	}
	endpoints := c.Endpoints()
	if r.LeaderFirst {
		var ok bool
		if endpoints, ok = c.EndpointsLeaderFirst(ctx); !ok {
			return m, errors.New("no member says which leads")
		}
	}
	runBench := func(d time.Duration) (string, error) {
		return output(ctx, "", b.Bin, "bench", "--endpoints", endpoints, "--workload", r.Workload, "--workers", strconv.Itoa(r.Workers),
			"--conns", strconv.Itoa(r.Conns), "--duration", d.String(), "--warmup", "0s", "--json")
	}
	if r.Warmup > 0 {
		if _, err := runBench(r.Warmup); err != nil {
			return m, fmt.Errorf("warm-up: %w", err)
		}
	}
	leader, leaderOK := c.Leader(ctx)
	var setup usage
	if r.ExcludeSetup {
		// A window of 1 ns ends before any worker starts a cycle.
		if setup, err = c.around(leader, leaderOK, func() error { _, err := runBench(time.Nanosecond); return err }); err != nil {
			return m, fmt.Errorf("run with an empty window: %w", err)
		}
		m.SetupExcluded, m.SetupCPU, m.LeaderSetupCPU = true, setup.all, setup.leader
	}
	var out string
	used, err := c.around(leader, leaderOK, func() (err error) { out, err = runBench(r.Duration); return err })
	if err != nil {
		return m, err
	}
	if err := DecodeReport(out, &m.Report); err != nil {
		return m, err
	}
	if m.Report.Errors > 0 {
		return m, fmt.Errorf("bench reported %d errors, the first: %s", m.Report.Errors, m.Report.FirstError)
	}
	if n := time.Duration(m.Report.Cycles); n > 0 {
		if used.allOK && (!r.ExcludeSetup || setup.allOK) && used.all > setup.all {
			m.CPUPerCycle = (used.all - setup.all) / n
		}
		if used.leader > setup.leader {
			m.LeaderCPUPerCycle = (used.leader - setup.leader) / n
		}
	}
	return m, nil
}

// usage is the CPU the members used over some time: all three, and the
// leader alone (0 if unknown).
type usage struct {
	all, leader time.Duration
	allOK       bool
}

// around returns the members' CPU while fn ran; the leader's is read
// from process leader if leaderOK.
func (c *Cluster) around(leader int, leaderOK bool, fn func() error) (usage, error) {
	var u usage
	all0, ok0 := c.CPU()
	var lead0, lead1 time.Duration
	var err0, err1 error
	if leaderOK {
		lead0, err0 = ProcCPU(leader)
	}
	if err := fn(); err != nil {
		return u, err
	}
	all1, ok1 := c.CPU()
	if leaderOK {
		lead1, err1 = ProcCPU(leader)
	}
	if ok0 && ok1 {
		u.all, u.allOK = all1-all0, true
	}
	if leaderOK && err0 == nil && err1 == nil {
		u.leader = lead1 - lead0
	}
	return u, nil
}

// DecodeReport reads the JSON report `baton bench --json` prints (one
// object, indented).
func DecodeReport(out string, r *bench.Report) error {
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return fmt.Errorf("no JSON report in bench's output %q", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(r); err != nil {
		return fmt.Errorf("bench's JSON report: %w", err)
	}
	return nil
}
