package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
	"github.com/batonlock/baton/benchmarks/internal/report"
	"github.com/batonlock/baton/internal/bench"
)

// result is a finished run of the command: every N's measurements.
type result struct {
	opts                  options
	build                 cluster.Build
	started               time.Time
	loadBefore, loadAfter string // load averages around the run
	machine               report.Machine
	runs                  map[int][]cluster.Measurement // N -> one per round
}

// row is one N's figures over the rounds.
type row struct {
	clients                      int
	cycles, cyclesMin, cyclesMax float64 // cycles/s: median and range
	p50, p99                     float64 // acquire, ms: medians
	cpu, leaderCPU               float64 // CPU per cycle, µs: medians; 0 if unknown in any round
	leaderSession                float64 // the leader's CPU to connect, open and close one client's session, µs: median; 0 if unknown
}

// minSessionsCPU is the least of the leader's CPU over the run with an
// empty window from which the report divides a figure per session: ten
// of /proc's 10 ms ticks, so that the figure is within 10%.
const minSessionsCPU = 100 * time.Millisecond

// rows is the figures of every N, in ascending order of N.
func (r *result) rows() []row {
	var rows []row
	for _, n := range r.opts.clients {
		ms := r.runs[n]
		if len(ms) == 0 {
			continue
		}
		var cycles, p50, p99, cpu, lead, session []float64
		for _, m := range ms {
			cycles = append(cycles, m.Report.CyclesPerSec)
			p50 = append(p50, m.Report.AcquireP50)
			p99 = append(p99, m.Report.AcquireP99)
			if m.CPUPerCycle > 0 {
				cpu = append(cpu, float64(m.CPUPerCycle)/float64(time.Microsecond))
			}
			if m.LeaderCPUPerCycle > 0 {
				lead = append(lead, float64(m.LeaderCPUPerCycle)/float64(time.Microsecond))
			}
			if m.LeaderSetupCPU >= minSessionsCPU {
				session = append(session, float64(m.LeaderSetupCPU)/float64(time.Microsecond)/float64(n))
			}
		}
		rw := row{clients: n, cycles: report.Median(cycles), cyclesMin: slices.Min(cycles), cyclesMax: slices.Max(cycles),
			p50: report.Median(p50), p99: report.Median(p99)}
		if len(cpu) == len(ms) {
			rw.cpu = report.Median(cpu)
		}
		if len(lead) == len(ms) {
			rw.leaderCPU = report.Median(lead)
		}
		if len(session) == len(ms) {
			rw.leaderSession = report.Median(session)
		}
		rows = append(rows, rw)
	}
	return rows
}

// us formats a CPU time per cycle in µs, "-" when unknown.
func us(v float64, unit string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// cyclesCell is a row's cycles/s: the median and, over several rounds,
// the range.
func (rw row) cyclesCell(dash string) string {
	s := report.Rate(rw.cycles)
	if rw.cyclesMin != rw.cyclesMax {
		s += fmt.Sprintf(" (%s%s%s)", report.Rate(rw.cyclesMin), dash, report.Rate(rw.cyclesMax))
	}
	return s
}

// table is the text report: one line per N.
func (r *result) table() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "%s/N, N clients each its own, %d rounds of %s after %s warm-up; medians over the rounds:\n", o.workload, o.rounds, o.duration, o.warmup)
	fmt.Fprintf(&b, "%7s  %-26s  %11s  %11s  %18s  %16s  %18s\n", "clients", "cycles/s (range)", "acquire p50", "acquire p99",
		"servers' CPU/cycle", "leader CPU/cycle", "leader CPU/session")
	for _, rw := range r.rows() {
		fmt.Fprintf(&b, "%7d  %-26s  %11s  %11s  %18s  %16s  %18s\n", rw.clients, rw.cyclesCell("-"), report.MS(rw.p50), report.MS(rw.p99),
			us(rw.cpu, "us"), us(rw.leaderCPU, "us"), us(rw.leaderSession, "us"))
	}
	return b.String()
}

// sectionName names what the command writes for a workload: the
// section's markers of the Markdown file and the chart's file name.
// own/N's is "scaling"; each other workload has its own, so that their
// sections stand side by side.
func sectionName(workload string) string {
	if workload == bench.OwnKeys {
		return "scaling"
	}
	return "scaling-" + workload
}

// sectionTitles are the sections' headings.
var sectionTitles = map[string]string{
	bench.OwnKeys: "Scaling with connections",
	bench.HotKey:  "One lock, scaling with the clients queued on it",
	bench.Zipf:    "Zipf's keys, scaling with connections",
}

// markers are the begin and end markers of a workload's section.
func markers(workload string) (begin, end string) {
	name := sectionName(workload)
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// readSection reads path and splits it around the workload's section:
// head ends with the begin marker, tail starts with the end marker.
func readSection(path, workload string) (head, tail string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	return splitSection(string(b), path, workload)
}

func splitSection(doc, path, workload string) (head, tail string, err error) {
	beginMarker, endMarker := markers(workload)
	if strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
		return "", "", fmt.Errorf("%s: want %s and %s once each, around the section to write (add them where it goes)", path, beginMarker, endMarker)
	}
	i := strings.Index(doc, beginMarker) + len(beginMarker)
	j := strings.Index(doc, endMarker)
	if j < i {
		return "", "", fmt.Errorf("%s: %s comes before %s", path, endMarker, beginMarker)
	}
	return doc[:i], doc[j:], nil
}

// write rewrites the section of the -out file and writes the chart.
func (r *result) write() error {
	head, tail, err := readSection(r.opts.out, r.opts.workload)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(r.opts.out), r.opts.chart)
	if err != nil {
		rel = r.opts.chart
	}
	if err := writeChart(r.opts.chart, r); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return os.WriteFile(r.opts.out, []byte(head+"\n"+r.section(filepath.ToSlash(rel))+tail), 0o644)
}

// command is the command line that made the report, run from benchmarks/.
func (r *result) command() string {
	return strings.TrimSpace("go run ./cmd/scaling " + strings.Join(r.opts.args, " "))
}

// section is the Markdown between the markers; chart is the chart's path
// without extension, relative to the file.
func (r *result) section(chart string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	o := r.opts
	p("## %s\n\n", sectionTitles[o.workload])
	p("<!-- Generated by benchmarks/cmd/scaling: rerun it instead of editing between the %s markers. -->\n\n", sectionName(o.workload))
	p("**%s/N with N clients:** N workers, each with its own client, so its own connection and session, as each process of a fleet has "+
		"(`baton bench --workload %s --workers N --conns N`), every N on a fresh 3-member cluster of %s (fsync on, 127.0.0.1). "+
		"`--endpoints` names the leader first, so each client's two connections, its session framing and an idle gRPC one, are both on the leader. "+
		"%d rounds, the Ns in ascending order in odd rounds and descending in even ones; each run measured for %s after %s of warm-up. "+
		"Cells are medians over the rounds, with the range of cycles/s in brackets. "+
		"*CPU per cycle* is the members' user and system time from `/proc` over the measured `baton bench` process, "+
		"less their time over a run of the same N clients with an empty window just before it (connecting the clients, opening and closing their sessions), "+
		"divided by the measured cycles: all three members', then the leader's alone. "+
		"*Leader's CPU per session* is the leader's time over that run with an empty window divided by N, "+
		"where that time is long enough to divide (100 ms; `/proc` counts in 10 ms ticks).\n\n",
		o.workload, o.workload, "`"+r.build.Label+"`", o.rounds, o.duration, o.warmup)
	if chart != "" {
		p("![Cycles/s and the leader's CPU per cycle against the number of clients](%s.svg)\n\n", chart)
	}
	p("| clients | cycles/s | acquire p50 | acquire p99 | servers' CPU per cycle | leader's CPU per cycle | leader's CPU per session |\n")
	p("|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, rw := range r.rows() {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", report.Rate(float64(rw.clients)), rw.cyclesCell("–"), report.MS(rw.p50), report.MS(rw.p99),
			us(rw.cpu, "µs"), us(rw.leaderCPU, "µs"), us(rw.leaderSession, "µs"))
	}
	p("\nRun on %s, the machine's load average (1, 5, 15 minutes) %s before and %s after, with:\n\n",
		r.started.Format("2006-01-02 15:04 UTC"), r.loadBefore, r.loadAfter)
	p("```sh\ncd benchmarks\n%s\n```\n\n", r.command())
	p("The members get `--max-client-conns %d` (%d per client of the largest N, and %d more); the load generator shares the machine's cores with them.\n\n",
		maxClientConns(o.clients), connsPerClient, connsSpare)
	p("%s", r.machine.Table())
	return b.String()
}
