package cluster

import (
	"context"
	"encoding/json"
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
}

// Measurement is what one Run measured.
type Measurement struct {
	Report            bench.Report
	CPUPerCycle       time.Duration // the three members' CPU per cycle; 0 if unknown
	LeaderCPUPerCycle time.Duration // the leader's alone; 0 if unknown
}

func (m Measurement) String() string {
	us := func(d time.Duration) string {
		if d <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
	return fmt.Sprintf("%9.0f cycles/s  acquire p50 %6.2f ms  p99 %6.2f ms  servers' CPU/cycle %s (leader %s)  errors %d",
		m.Report.CyclesPerSec, m.Report.AcquireP50, m.Report.AcquireP99, us(m.CPUPerCycle), us(m.LeaderCPUPerCycle), m.Report.Errors)
}

// Measure starts a fresh cluster of b in dir, warms it up, runs the
// workload with b's own `baton bench`, reads the members' CPU around the
// measured run, and stops the cluster. The CPU read covers the whole
// `baton bench` process: its sessions' opening and closing as well as
// the measured window. dir is removed afterwards unless r.Keep or the
// run failed.
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
	args := func(d time.Duration) []string {
		return []string{"bench", "--endpoints", c.Endpoints(), "--workload", r.Workload, "--workers", strconv.Itoa(r.Workers),
			"--conns", strconv.Itoa(r.Conns), "--duration", d.String(), "--warmup", "0s", "--json"}
	}
	if r.Warmup > 0 {
		if _, err := output(ctx, "", b.Bin, args(r.Warmup)...); err != nil {
			return m, fmt.Errorf("warm-up: %w", err)
		}
	}
	leader, leaderOK := c.Leader(ctx)
	cpu0, cpuOK := c.CPU()
	var lead0 time.Duration
	if leaderOK {
		lead0, _ = ProcCPU(leader)
	}
	out, err := output(ctx, "", b.Bin, args(r.Duration)...)
	if err != nil {
		return m, err
	}
	cpu1, cpuOK1 := c.CPU()
	var lead1 time.Duration
	if leaderOK {
		lead1, _ = ProcCPU(leader)
	}
	if err := DecodeReport(out, &m.Report); err != nil {
		return m, err
	}
	if m.Report.Errors > 0 {
		return m, fmt.Errorf("bench reported %d errors, the first: %s", m.Report.Errors, m.Report.FirstError)
	}
	if cpuOK && cpuOK1 && m.Report.Cycles > 0 {
		m.CPUPerCycle = (cpu1 - cpu0) / time.Duration(m.Report.Cycles)
	}
	if lead1 > lead0 && m.Report.Cycles > 0 {
		m.LeaderCPUPerCycle = (lead1 - lead0) / time.Duration(m.Report.Cycles)
	}
	return m, nil
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
