// Command scaling measures how one build of Baton scales with the number
// of clients: own/N for N clients, each worker its own client (its own
// connection and session, as each process of a fleet has), every N on a
// fresh 3-member cluster. It reports per N the median and range of
// cycles/s over the rounds, acquire p50 and p99, and the CPU per cycle of
// the three servers and of the leader alone, read from /proc around the
// measured run as abtest reads them (package benchmarks/internal/cluster),
// less what connecting the N clients and opening and closing their
// sessions cost (measured by a run of the same clients with an empty
// window): a cost paid once per session, which grows with N and would
// otherwise make the curve rise for it.
//
//	cd benchmarks && go run ./cmd/scaling                                  # HEAD, N = 1,16,64,256,1024, 3 rounds
//	cd benchmarks && go run ./cmd/scaling -build main -out ../docs/BENCHMARKS.md
//
// Rounds run the N in alternating order (ascending, then descending), so
// that a machine whose speed drifts during the run favours no N. With
// -out, the command rewrites the section of that Markdown file between
// its markers (scaling:begin and scaling:end, in HTML comments, for own;
// scaling-hot and scaling-zipf for the other workloads, each a section of
// its own) and writes the chart beside it; nothing outside the markers
// changes.
//
// `baton bench` gets the leader's address first, so that every client's
// two connections (the session framing and an idle gRPC one) are on the
// leader whichever member won the election; with another member first,
// the idle one would go there, and the leader's load would depend on the
// election. At 1,024 clients that is 2,048 connections on the leader: the
// command passes the members a --max-client-conns for the largest N and
// checks up front that the open file limit allows it.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
	"github.com/batonlock/baton/benchmarks/internal/report"
	"github.com/batonlock/baton/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	build            string
	workload         string
	clients          []int
	rounds           int
	duration, warmup time.Duration
	basePort         int
	keep             bool
	out, chart       string
	args             []string // as given, for the report
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("scaling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.build, "build", "HEAD", "the build: a baton binary, or a git revision of this repository to build")
	fs.StringVar(&o.workload, "workload", bench.OwnKeys, "the `baton bench` workload: own (each worker its own key), hot (one key) or zipf")
	clients := fs.String("clients", "1,16,64,256,1024", "comma-separated numbers of clients N: N workers, each its own client (baton bench --conns N)")
	fs.IntVar(&o.rounds, "rounds", 3, "runs of every N, in ascending order of N in odd rounds and descending in even ones")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before each measured run, on the same cluster")
	fs.IntVar(&o.basePort, "port", 27900, "client ports PORT, PORT+10, PORT+20; peer ports one above each")
	fs.BoolVar(&o.keep, "keep", false, "keep the clusters' data directories and logs")
	fs.StringVar(&o.out, "out", "", "a Markdown file whose section between <!-- scaling:begin --> and <!-- scaling:end --> (own; scaling-hot, scaling-zipf for the others) is rewritten with the results")
	fs.StringVar(&o.chart, "chart", "", "the chart's path without extension, .svg and .png written (default: the section's name beside -out; none without -out)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: cd benchmarks && go run ./cmd/scaling [flags]\n\n"+
			"Runs one build of Baton on fresh 3-member clusters on 127.0.0.1 with N clients,\n"+
			"each worker its own, and reports per N cycles/s, acquire latency and the\n"+
			"servers' and the leader's CPU per cycle.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch o.workload {
	case bench.OwnKeys, bench.HotKey, bench.Zipf:
	default:
		return o, fmt.Errorf("-workload %q: want own, hot or zipf", o.workload)
	}
	var err error
	if o.clients, err = parseClients(*clients); err != nil {
		return o, err
	}
	if err := cluster.CheckFlags(o.rounds, o.duration, o.warmup, o.basePort); err != nil {
		return o, err
	}
	if o.chart == "" && o.out != "" {
		o.chart = filepath.Join(filepath.Dir(o.out), sectionName(o.workload))
	}
	return o, nil
}

// maxClients bounds -clients: `baton bench` takes at most 10,000 workers.
const maxClients = 10000

// parseClients reads "1,16,64": distinct numbers of clients, sorted.
func parseClients(s string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxClients {
			return nil, fmt.Errorf("-clients: %q is not a number of clients from 1 to %d", f, maxClients)
		}
		if slices.Contains(ns, n) {
			return nil, fmt.Errorf("-clients: %d twice", n)
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns, nil
}

// Descriptors. A client holds two connections to the leader (the session
// framing and an idle gRPC one) and may hold one to another member it
// tried first; connsPerClient counts a third for that. connsSpare leaves
// room for status requests, operators and a client reconnecting.
const (
	connsPerClient = 3
	connsSpare     = 100
	// reservedFiles is embed.ReservedFiles, what a member keeps of its
	// open file limit for the log, snapshots and peers beyond client
	// connections (a test checks they agree).
	reservedFiles = 1024
)

// maxClientConns is the --max-client-conns every member gets: enough for
// the largest N, the same for every N so that the members are configured
// alike throughout.
func maxClientConns(clients []int) int {
	return connsPerClient*slices.Max(clients) + connsSpare
}

// checkOpenFiles says whether an open file limit of limit (inherited by
// the members and the load generator) is enough for clients.
func checkOpenFiles(limit uint64, clients []int) error {
	need := uint64(maxClientConns(clients) + reservedFiles)
	if limit < need {
		return fmt.Errorf("the open file limit (ulimit -n) is %d; %d clients need %d: %d connections per member (%d per client and %d more) and %d for the member's log, snapshots and peers; "+
			"raise it (ulimit -n %d) or lower -clients", limit, slices.Max(clients), need, maxClientConns(clients), connsPerClient, connsSpare, reservedFiles, need)
	}
	return nil
}

// openFileLimit is this process's soft limit on open files, which the
// processes it starts inherit.
func openFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the open file limit: %w", err)
	}
	return rl.Cur, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "scaling: %v\n", err)
		return 2
	}
	limit, err := openFileLimit()
	if err == nil {
		err = checkOpenFiles(limit, o.clients)
	}
	if err != nil {
		fmt.Fprintf(stderr, "scaling: %v\n", err)
		return 2
	}
	if o.out != "" {
		// Refuse before the run, not after it, a file without markers.
		if _, _, err := readSection(o.out, o.workload); err != nil {
			fmt.Fprintf(stderr, "scaling: %v\n", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := cluster.NewWorkdir("scaling-", o.keep)
	if err != nil {
		fmt.Fprintf(stderr, "scaling: %v\n", err)
		return 1
	}
	if o.keep {
		fmt.Fprintf(stdout, "data and logs in %s\n", work.Dir)
	}
	defer work.Close()
	r := &result{opts: o, started: time.Now().UTC(), loadBefore: report.LoadAverage(), machine: report.ProbeMachine()}
	if r.build, err = cluster.Resolve(ctx, o.build, filepath.Join(work.Dir, "build")); err != nil {
		fmt.Fprintf(stderr, "scaling: build %s: %v\n", o.build, err)
		return 1
	}
	fmt.Fprintf(stdout, "build: %s\nclients: each worker its own (baton bench --conns N); members: --max-client-conns %d\n",
		r.build.Label, maxClientConns(o.clients))
	r.runs = make(map[int][]cluster.Measurement)
	for round := 1; round <= o.rounds; round++ {
		for _, n := range roundOrder(o.clients, round) {
			dir := filepath.Join(work.Dir, fmt.Sprintf("%s-%d-round%d", o.workload, n, round))
			m, err := cluster.Measure(ctx, r.build, o.run(n), dir)
			if err != nil {
				fmt.Fprintf(stderr, "scaling: %s/%d round %d: %v\n", o.workload, n, round, err)
				work.Keep = true // for the members' logs
				return 1
			}
			r.runs[n] = append(r.runs[n], m)
			fmt.Fprintf(stdout, "%-9s round %d: %s\n", fmt.Sprintf("%s/%d", o.workload, n), round, m)
		}
	}
	r.loadAfter = report.LoadAverage()
	fmt.Fprintf(stdout, "\n%s", r.table())
	if o.out == "" {
		return 0
	}
	if err := r.write(); err != nil {
		fmt.Fprintf(stderr, "scaling: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote the section of %s, %s.svg and %s.png\n", o.out, o.chart, o.chart)
	return 0
}

// roundOrder is the order of the Ns in round (from 1): ascending in odd
// rounds, descending in even ones.
func roundOrder(clients []int, round int) []int {
	order := slices.Clone(clients)
	if round%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

// run is how N clients are measured: N workers, each its own client.
func (o options) run(n int) cluster.Run {
	return cluster.Run{Workload: o.workload, Workers: n, Conns: n, Warmup: o.warmup, Duration: o.duration, BasePort: o.basePort,
		ServerArgs: []string{"--max-client-conns", strconv.Itoa(maxClientConns(o.clients))}, Keep: o.keep, LeaderFirst: true, ExcludeSetup: true}
}
