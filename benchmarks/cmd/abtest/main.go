// Command abtest alternates two builds of Baton on fresh 3-member clusters
// and reports, pair by pair, what a workload did on each: cycles/s,
// acquire p50 and p99, and the servers' CPU per cycle.
//
// On the shared, noisy machines these benchmarks run on, the side-by-side
// ratios of one build move by more from run to run than a change of 5-10%
// moves them. Pairs run back to back on fresh clusters, in alternating
// order, and counted as wins, resolve such a change; the servers' CPU per
// cycle, read from /proc, is the steadiest figure of all
// (docs/BENCHMARKS.md, "Run to run").
//
//	go -C benchmarks run ./cmd/abtest -a cc40e06 -b HEAD -workloads own/1,own/64 -rounds 6
//	go -C benchmarks run ./cmd/abtest -a HEAD -b HEAD -env-b GOGC=200
//
// Each worker of `baton bench` has its own client (--conns equal to the
// workers), as each process of a fleet has; -shared puts every worker's
// session on one client (--conns 1). Both builds get --conns explicitly,
// so builds whose `baton bench` has another default measure the same.
//
// -a and -b each name a baton binary or a git revision of this repository,
// which is built into a temporary directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	a, b             string
	envA, envB       []string
	workloads        []workload
	rounds           int
	duration, warmup time.Duration
	basePort         int
	keep             bool
	shared           bool // every worker's session on one client, not one client per worker
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("abtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.a, "a", "", "build A: a baton binary, or a git revision of this repository to build")
	fs.StringVar(&o.b, "b", "HEAD", "build B: a baton binary, or a git revision of this repository to build")
	envA := fs.String("env-a", "", "space-separated KEY=VALUE added to build A's servers' environment")
	envB := fs.String("env-b", "", "space-separated KEY=VALUE added to build B's servers' environment")
	wls := fs.String("workloads", "own/64", "comma-separated KIND/WORKERS of `baton bench` (own, hot, zipf, batch, hold)")
	fs.IntVar(&o.rounds, "rounds", 6, "pairs per workload; A runs first in odd rounds, B in even ones")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before each measured run, on the same cluster")
	fs.IntVar(&o.basePort, "port", 27800, "client ports PORT, PORT+10, PORT+20; peer ports one above each")
	fs.BoolVar(&o.keep, "keep", false, "keep the clusters' data directories and logs")
	fs.BoolVar(&o.shared, "shared", false, "the shared-connection variant: every worker's session on one client (baton bench --conns 1) "+
		"instead of one client per worker (--conns equal to the workers), whatever the builds' default")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./cmd/abtest -a BUILD [-b BUILD] [flags]\n\n"+
			"Alternates two builds of Baton on fresh 3-member clusters on 127.0.0.1 and\n"+
			"reports cycles/s, acquire latency and the servers' CPU per cycle, pair by pair.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.a == "" {
		return o, errors.New("-a is required: a baton binary or a git revision")
	}
	if err := cluster.CheckFlags(o.rounds, o.duration, o.warmup, o.basePort); err != nil {
		return o, err
	}
	var err error
	if o.envA, err = parseEnv("-env-a", *envA); err != nil {
		return o, err
	}
	if o.envB, err = parseEnv("-env-b", *envB); err != nil {
		return o, err
	}
	if o.workloads, err = parseWorkloads(*wls); err != nil {
		return o, err
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "abtest: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := cluster.NewWorkdir("abtest-", o.keep)
	if err != nil {
		fmt.Fprintf(stderr, "abtest: %v\n", err)
		return 1
	}
	if o.keep {
		fmt.Fprintf(stdout, "data and logs in %s\n", work.Dir)
	}
	defer work.Close()
	names := [2]string{"A", "B"}
	var builds [2]cluster.Build
	for i, spec := range []string{o.a, o.b} {
		b, err := cluster.Resolve(ctx, spec, filepath.Join(work.Dir, "build-"+names[i]))
		if err != nil {
			fmt.Fprintf(stderr, "abtest: build %s (%s): %v\n", names[i], spec, err)
			return 1
		}
		b.Env = [2][]string{o.envA, o.envB}[i]
		if len(b.Env) > 0 {
			b.Label += " [" + strings.Join(b.Env, " ") + "]"
		}
		builds[i] = b
		fmt.Fprintf(stdout, "%s: %s\n", names[i], b.Label)
	}
	fmt.Fprintf(stdout, "clients: %s\n", o.variant())
	for _, w := range o.workloads {
		var pairs []pair
		for r := 1; r <= o.rounds; r++ {
			order := []int{0, 1}
			if r%2 == 0 {
				order = []int{1, 0}
			}
			var p pair
			for _, i := range order {
				dir := filepath.Join(work.Dir, fmt.Sprintf("%s-%d-%s", strings.ReplaceAll(w.String(), "/", "-"), r, names[i]))
				m, err := cluster.Measure(ctx, builds[i], o.run(w), dir)
				if err != nil {
					fmt.Fprintf(stderr, "abtest: %s round %d, %s: %v\n", w, r, names[i], err)
					work.Keep = true // for the members' logs
					return 1
				}
				p[i] = m
				fmt.Fprintf(stdout, "%-8s round %d %s: %s\n", w, r, names[i], m)
			}
			pairs = append(pairs, p)
		}
		fmt.Fprintln(stdout, summarize(w, o.variant(), pairs))
	}
	return 0
}

// variant says how `baton bench`'s workers reach the cluster.
func (o options) variant() string {
	if o.shared {
		return "shared connection, every worker's session on one client (--conns 1)"
	}
	return "one per worker, each its own connection and session (--conns equal to the workers)"
}

// run is how w is measured on each build.
func (o options) run(w workload) cluster.Run {
	return cluster.Run{Workload: w.kind, Workers: w.workers, Conns: o.conns(w),
		Warmup: o.warmup, Duration: o.duration, BasePort: o.basePort, Keep: o.keep}
}

// conns is the --conns of `baton bench` for w.
func (o options) conns(w workload) int {
	if o.shared {
		return 1
	}
	return w.workers
}
