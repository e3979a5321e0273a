package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
	"github.com/batonlock/baton/benchmarks/internal/report"
	"github.com/batonlock/baton/internal/bench"
)

// workload is a `baton bench` workload and its number of workers.
type workload struct {
	kind    string
	workers int
}

func (w workload) String() string { return fmt.Sprintf("%s/%d", w.kind, w.workers) }

func parseWorkloads(s string) ([]workload, error) {
	var ws []workload
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		kind, n, ok := strings.Cut(f, "/")
		workers, err := strconv.Atoi(n)
		if !ok || err != nil || workers < 1 {
			return nil, fmt.Errorf("workload %q: want KIND/WORKERS, e.g. own/64", f)
		}
		switch kind {
		case bench.OwnKeys, bench.HotKey, bench.Zipf, bench.Batch, bench.Hold:
		default:
			return nil, fmt.Errorf("workload %q: kind %q is not one of own, hot, zipf, batch, hold", f, kind)
		}
		ws = append(ws, workload{kind, workers})
	}
	return ws, nil
}

// parseEnv splits "K=V K2=V2" and checks every word is KEY=VALUE.
func parseEnv(flagName, s string) ([]string, error) {
	env := strings.Fields(s)
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", flagName, kv)
		}
	}
	return env, nil
}

// pair is one round: A's measurement and B's.
type pair [2]cluster.Measurement

// summarize is the report of a workload's pairs, with the clients' variant:
// each side's medians, and B against A pair by pair.
func summarize(w workload, clients string, pairs []pair) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, %d pairs, clients %s:\n", w, len(pairs), clients)
	for i, name := range []string{"A", "B"} {
		var cps, p50, cpu, lead []float64
		for _, p := range pairs {
			cps = append(cps, p[i].Report.CyclesPerSec)
			p50 = append(p50, p[i].Report.AcquireP50)
			if p[i].CPUPerCycle > 0 {
				cpu = append(cpu, float64(p[i].CPUPerCycle)/float64(time.Microsecond))
			}
			if p[i].LeaderCPUPerCycle > 0 {
				lead = append(lead, float64(p[i].LeaderCPUPerCycle)/float64(time.Microsecond))
			}
		}
		fmt.Fprintf(&b, "  %s: cycles/s median %.0f (%.0f-%.0f), acquire p50 median %.2f ms", name, report.Median(cps), slices.Min(cps), slices.Max(cps), report.Median(p50))
		if len(cpu) == len(pairs) {
			fmt.Fprintf(&b, ", servers' CPU/cycle median %.1f us", report.Median(cpu))
		}
		if len(lead) == len(pairs) {
			fmt.Fprintf(&b, " (leader %.1f us)", report.Median(lead))
		}
		b.WriteString("\n")
	}
	var ratios []float64
	faster, lowerP50, lowerCPU, cpuPairs := 0, 0, 0, 0
	for _, p := range pairs {
		a, bb := p[0], p[1]
		if a.Report.CyclesPerSec > 0 {
			ratios = append(ratios, bb.Report.CyclesPerSec/a.Report.CyclesPerSec)
		}
		if bb.Report.CyclesPerSec > a.Report.CyclesPerSec {
			faster++
		}
		if bb.Report.AcquireP50 < a.Report.AcquireP50 {
			lowerP50++
		}
		if a.CPUPerCycle > 0 && bb.CPUPerCycle > 0 {
			cpuPairs++
			if bb.CPUPerCycle < a.CPUPerCycle {
				lowerCPU++
			}
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(&b, "  B/A cycles/s: median %.3f (%.3f-%.3f); B ahead in %d of %d pairs, lower acquire p50 in %d",
			report.Median(ratios), slices.Min(ratios), slices.Max(ratios), faster, len(pairs), lowerP50)
		if cpuPairs > 0 {
			fmt.Fprintf(&b, ", less CPU per cycle in %d of %d", lowerCPU, cpuPairs)
		}
		b.WriteString("\n")
	}
	return b.String()
}
