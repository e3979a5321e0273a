// Command sidebyside benchmarks Baton side by side with etcd, ZooKeeper,
// Redis and PostgreSQL in one run and writes docs/BENCHMARKS.md with the
// table, the ratios and a chart.
//
// Run it from the benchmarks folder:
//
//	cd benchmarks && go run ./cmd/sidebyside          # 8 s per workload after 2 s warm-up
//	cd benchmarks && go run ./cmd/sidebyside -quick   # 2 s after 0.5 s
//	go -C benchmarks run ./cmd/sidebyside             # the same, from the repository root
//
// It starts one system at a time with scripts/<system>.sh (installing the
// Debian package first if needed), runs every workload against it, and
// stops it before the next, so the systems never compete for the CPU.
// Everything listens on 127.0.0.1; data lives in a temporary directory.
// Baton's rows come from `baton bench` against a 3-node cluster built from
// this checkout; the others' from the Go drivers in ../lockers driven by
// the same engine (internal/bench) in this process.
//
// Every system is measured alike: each worker has its own client, so its
// own connection and session, as each process of a fleet has. The
// shared-connection variant, every worker's session on one client, is a
// system of its own in -systems (baton/shared, etcd/shared), run on fresh
// servers and labelled as such in the report; the systems whose client
// cannot carry many sessions on one connection have none.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/report"
	"github.com/batonlock/baton/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// options are the command's flags after parsing.
type options struct {
	warmup, duration time.Duration
	quick            bool
	systems          []system
	loads            []workload
	out, chart       string
	keep             bool
	settle           time.Duration
	rounds           int
	args             []string
}

// quietCPU is the CPU use (by other work) under which a system starts
// without waiting: on two cores, a test run elsewhere takes 50% or more.
const quietCPU = 0.2

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	duration := fs.Duration("duration", 8*time.Second, "measured time per workload and system")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured warm-up before each measurement")
	quick := fs.Bool("quick", false, "a quick run: 2s per workload after 0.5s warm-up (overrides -duration and -warmup)")
	sysList := fs.String("systems", strings.Join(systemNames(), ","),
		"systems to run, in table order; every worker has its own connection and session. "+
			"The shared-connection variant, every worker's session on one client, is a system of its own: "+strings.Join(sharedIDs(), ", "))
	loadList := fs.String("workloads", "own/1,own/64,hot/16,zipf/64", "KIND/WORKERS,... with KIND own, hot or zipf")
	out := fs.String("out", "../docs/BENCHMARKS.md", "the Markdown report to write")
	chart := fs.String("chart", "../docs/benchmarks", "the chart's path without extension: .svg and .png are written")
	keep := fs.Bool("keep", false, "keep the data directory (logs, data) instead of removing it")
	settle := fs.Duration("settle", time.Minute, "before each system, wait up to this long for other work to leave the CPU under 20% busy")
	rounds := fs.Int("rounds", 1, "run every system this many times, in reverse order every other round; the report shows the median round and the ratios' spread")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: cd benchmarks && go run ./cmd/sidebyside [flags]\n"+
			"   or, from the repository root: go -C benchmarks run ./cmd/sidebyside [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o := options{warmup: *warmup, duration: *duration, quick: *quick, out: *out, chart: *chart, keep: *keep, settle: *settle, rounds: *rounds, args: args}
	if o.quick {
		o.warmup, o.duration = 500*time.Millisecond, 2*time.Second
	}
	if o.duration <= 0 || o.warmup < 0 {
		return options{}, fmt.Errorf("-duration must be positive and -warmup not negative")
	}
	if o.rounds < 1 || o.rounds > 9 {
		return options{}, fmt.Errorf("-rounds must be 1..9, not %d", o.rounds)
	}
	var err error
	if o.systems, err = parseSystems(*sysList); err != nil {
		return options{}, err
	}
	if o.loads, err = parseWorkloads(*loadList); err != nil {
		return options{}, err
	}
	return o, nil
}

func run(args []string) int {
	o, err := parseFlags(args)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		return 2
	}
	if _, err := os.Stat(filepath.Join("scripts", "common.sh")); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside: run me from the benchmarks folder: cd benchmarks && go run ./cmd/sidebyside")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "baton-sidebyside-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		return 1
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "data and logs in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	d := &doc{
		generated: time.Now().UTC(), args: o.args, quick: o.quick, warmup: o.warmup, duration: o.duration, rounds: o.rounds,
		machine: report.ProbeMachine(), clients: moduleVersions(), versions: map[string]string{},
		startCmds: map[string][]string{}, busy: map[string]string{}, loads: o.loads, systems: o.systems, dir: dir,
	}
	if root, err := filepath.Abs(".."); err == nil {
		d.root = root
	}
	for round := 1; round <= o.rounds; round++ {
		// Every other round runs the systems in reverse order, so that a
		// machine that slows down or speeds up during the run does not
		// favour the systems that come first.
		order := slices.Clone(o.systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, s := range order {
			if ctx.Err() != nil {
				break
			}
			if o.rounds > 1 {
				fmt.Fprintf(os.Stderr, "== round %d of %d\n", round, o.rounds)
			}
			// Each round starts every system afresh in a directory of its
			// own: the scripts set up a new data directory, and
			// PostgreSQL's initdb refuses one that exists.
			rdir := dir
			if round > 1 {
				rdir = filepath.Join(dir, fmt.Sprintf("round%d", round))
				if err := os.MkdirAll(rdir, 0o755); err != nil {
					fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
					return 1
				}
			}
			for _, r := range runSystem(ctx, s, s.dataDir(rdir), o, d) {
				r.round = round
				d.results = append(d.results, r)
			}
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "sidebyside: interrupted; the report is not written")
		return 1
	}

	var reports []*bench.Report
	for _, w := range o.loads {
		for _, s := range o.systems {
			if r := d.find(s.id(), w); r != nil && r.report != nil {
				reports = append(reports, r.report)
			}
		}
	}
	fmt.Print(bench.Table(reports))

	rel, err := filepath.Rel(filepath.Dir(o.out), o.chart)
	if err != nil {
		rel = o.chart
	}
	d.chart = filepath.ToSlash(rel)
	if err := writeCharts(o.chart, d); err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: chart: %v\n", err)
		return 1
	}
	if err := writeDoc(o.out, d); err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "wrote %s, %s.svg and %s.png\n", o.out, o.chart, o.chart)
	return 0
}

// runSystem starts s, runs every workload on it and stops it.
func runSystem(ctx context.Context, s system, dir string, o options, d *doc) []result {
	notRun := func(note string) []result {
		rs := make([]result, len(o.loads))
		for i, w := range o.loads {
			rs[i] = result{sys: s, load: w, note: note}
		}
		return rs
	}
	d.versions[s.name] = serverVersion(s.name)
	// Wait (bounded by -settle) for other work on the machine to quieten.
	settle := time.Now().Add(o.settle)
	before := d.busy[s.id()] // earlier rounds'
	for {
		busy, ok := cpuBusy(time.Second)
		if !ok {
			break
		}
		d.busy[s.id()] = fmt.Sprintf("%.0f%%", 100*busy)
		if before != "" {
			d.busy[s.id()] = before + ", " + d.busy[s.id()]
		}
		if busy < quietCPU || !time.Now().Before(settle) || ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "waiting for the CPU to quieten: %.0f%% busy\n", 100*busy)
	}
	fmt.Fprintf(os.Stderr, "== %s (%s): starting\n", s.label(), d.versions[s.name])
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	cmds, endpoints, err := script(startCtx, s.name, "start", dir)
	cancel()
	if _, ok := d.startCmds[s.name]; !ok {
		d.startCmds[s.name] = cmds // the first round's, for the doc
	}
	defer func() {
		// Stop even after an interrupt, with a bounded wait of its own.
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, _, err := script(stopCtx, s.name, "stop", dir); err != nil {
			fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		}
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		return notRun("not run: the servers did not start (" + err.Error() + ")")
	}
	var rs []result
	for i, w := range o.loads {
		if ctx.Err() != nil {
			break
		}
		var r result
		if s.factory == nil {
			r, err = runBaton(ctx, s, filepath.Join(dir, s.name, "baton"), endpoints, w, o.warmup, o.duration)
			if err == errNoBench {
				fmt.Fprintf(os.Stderr, "%s: %v; Baton rows are marked not run\n", s.label(), err)
				rs := notRun("not run: " + errNoBench.Error())
				for i := range rs {
					rs[i].command = "baton " + strings.Join(batonArgs(s, endpoints, rs[i].load, o.warmup, o.duration), " ")
				}
				return rs
			}
		} else {
			r = runInProcess(ctx, s, endpoints, w, o.warmup, o.duration)
		}
		rs = append(rs, r)
		if r.report != nil {
			fmt.Fprint(os.Stderr, strings.SplitN(bench.Table([]*bench.Report{r.report}), "\n", 2)[1])
		} else {
			fmt.Fprintf(os.Stderr, "%-10s %-6s %7d  %s\n", s.id(), w.kind, w.workers, r.note)
		}
		if i < len(o.loads)-1 {
			// Let the last run's connections close before the next.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return rs
}
