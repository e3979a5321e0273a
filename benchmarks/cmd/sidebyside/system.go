package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/benchmarks/lockers"
	"github.com/batonlock/baton/internal/bench"
)

// system is one lock service under test, in one of two variants. By
// default every worker has its own client: one connection and one session,
// as each process of a fleet has. The shared-connection variant (shared)
// gives every worker its own session but one client for all of them; it
// runs only for systems whose client can carry many sessions on one
// connection.
type system struct {
	name   string // also the script's name: scripts/<name>.sh
	shared bool   // the shared-connection variant
	title  string
	setup  string // servers and durability, for the doc
	recipe string // how a worker locks, for the doc
	module string // Go client module (empty: Baton's own `baton bench`)
	// factory connects workers to the endpoints the script printed; nil
	// for Baton, whose load comes from `baton bench`.
	factory func(endpoints string) bench.Factory
	// sharedRecipe and sharedFactory are the shared-connection variant's
	// recipe and factory; noShare says why a system has none.
	sharedRecipe  string
	sharedFactory func(endpoints string) bench.Factory
	noShare       string
}

// sharedSuffix names the shared-connection variant in -systems: etcd/shared.
const sharedSuffix = "/shared"

// id names the system and variant in -systems, the raw reports and the
// text table: baton, baton/shared.
func (s system) id() string {
	if s.shared {
		return s.name + sharedSuffix
	}
	return s.name
}

// label is the system and variant in the doc's tables.
func (s system) label() string {
	if s.shared {
		return s.title + ", shared connection"
	}
	return s.title
}

// variant returns s's shared-connection variant.
func (s system) variant() (system, error) {
	if s.noShare != "" {
		return system{}, fmt.Errorf("%s has no shared-connection variant: %s", s.title, s.noShare)
	}
	v := s
	v.shared, v.recipe, v.factory = true, s.sharedRecipe, s.sharedFactory
	return v, nil
}

// dataDir is the directory the system's script gets under a round's
// directory: the variant runs on fresh servers of its own.
func (s system) dataDir(round string) string {
	if s.shared {
		return filepath.Join(round, "shared")
	}
	return round
}

// systems are listed in the order of the tables.
var systems = []system{
	{
		name: "baton", title: "Baton",
		setup: "3 nodes (`baton server`), fsync on (its default)",
		recipe: "`baton bench --conns N` with N the number of workers (its default): the product's Go client, one client per worker, " +
			"so each worker its own connection (to each member it talks to), Sessions stream and session",
		sharedRecipe: "`baton bench --conns 1`: one session per worker, all on one client, so on one connection and one Sessions stream",
	},
	{
		name: "etcd", title: "etcd",
		setup:  "3 members (Debian etcd-server), fsync on (its default)",
		recipe: "concurrency.Mutex, one client and one session (60 s lease) per worker",
		module: "go.etcd.io/etcd/client/v3",
		factory: func(e string) bench.Factory {
			return lockers.Etcd(strings.Split(e, ","))
		},
		sharedRecipe: "concurrency.Mutex, one session (60 s lease) per worker, all on one client, so on one gRPC connection to each member",
		sharedFactory: func(e string) bench.Factory {
			return lockers.EtcdShared(strings.Split(e, ","))
		},
	},
	{
		name: "zookeeper", title: "ZooKeeper",
		setup:  "3 servers (Debian zookeeper), forceSync on (its default)",
		recipe: "zk.NewLock recipe (ephemeral sequential znodes), one connection/session per worker",
		module: "github.com/go-zookeeper/zk",
		factory: func(e string) bench.Factory {
			return lockers.ZooKeeper(strings.Split(e, ","))
		},
		noShare: "a ZooKeeper session is its connection, so workers on one connection would share one session and its lock nodes",
	},
	{
		name: "redis", title: "Redis",
		setup:  "1 node (Debian redis-server), no RDB, no AOF: nothing is fsynced",
		recipe: "SET NX PX 30s, retried after 50 µs..2 ms jittered backoff; Lua compare-and-delete release; one connection per worker",
		module: "github.com/redis/go-redis/v9",
		factory: func(e string) bench.Factory {
			return lockers.Redis(e)
		},
		noShare: "go-redis gives a connection to one command at a time, so workers on one connection would queue for it, not share it",
	},
	{
		name: "postgres", title: "PostgreSQL",
		setup:  "1 node (Debian postgresql), defaults; advisory locks live in memory, not in the WAL",
		recipe: "pg_advisory_lock / pg_advisory_unlock on a 64-bit hash of the name, one connection per worker",
		module: "github.com/jackc/pgx/v5",
		factory: func(e string) bench.Factory {
			return lockers.Postgres("postgres://postgres@" + e + "/postgres?sslmode=disable")
		},
		noShare: "advisory locks belong to the connection's session, and a connection runs one statement at a time",
	},
}

// parseSystems parses "baton,etcd,baton/shared" into systems and variants.
func parseSystems(list string) ([]system, error) {
	var out []system
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		name, shared := strings.CutSuffix(f, sharedSuffix)
		i := slices.IndexFunc(systems, func(s system) bool { return s.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown system %q; want some of %s, each with %s for its shared-connection variant where it has one",
				f, strings.Join(systemNames(), ","), sharedSuffix)
		}
		s := systems[i]
		if shared {
			var err error
			if s, err = s.variant(); err != nil {
				return nil, err
			}
		}
		if slices.ContainsFunc(out, func(o system) bool { return o.id() == s.id() }) {
			return nil, fmt.Errorf("system %q listed twice", f)
		}
		out = append(out, s)
	}
	return out, nil
}

func systemNames() []string {
	names := make([]string, len(systems))
	for i, s := range systems {
		names[i] = s.name
	}
	return names
}

// sharedIDs lists the shared-connection variants there are: baton/shared,...
func sharedIDs() []string {
	var ids []string
	for _, s := range systems {
		if v, err := s.variant(); err == nil {
			ids = append(ids, v.id())
		}
	}
	return ids
}

// workload is one row group: a bench workload with a number of workers.
type workload struct {
	kind    string // bench.OwnKeys, bench.HotKey, ...
	workers int
}

func (w workload) String() string { return fmt.Sprintf("%s/%d", w.kind, w.workers) }

// parseWorkloads parses "own/1,own/64,hot/16".
func parseWorkloads(s string) ([]workload, error) {
	var ws []workload
	for f := range strings.SplitSeq(s, ",") {
		kind, n, ok := strings.Cut(strings.TrimSpace(f), "/")
		workers, err := strconv.Atoi(n)
		if !ok || err != nil || workers < 1 {
			return nil, fmt.Errorf("workload %q: want KIND/WORKERS, e.g. own/64", f)
		}
		switch kind {
		case bench.OwnKeys, bench.HotKey, bench.Zipf:
		default:
			return nil, fmt.Errorf("workload %q: kind must be own, hot or zipf", f)
		}
		ws = append(ws, workload{kind, workers})
	}
	if len(ws) == 0 {
		return nil, errors.New("no workloads")
	}
	return ws, nil
}

// result is one cell group of the table: a system under a workload.
type result struct {
	sys     system
	load    workload
	report  *bench.Report // nil when not run
	note    string        // why it was not run, or what failed
	command string        // the exact load command, for the doc
	round   int           // 1.., with -rounds
}

// script runs scripts/<name>.sh with args; it returns the "+ " command
// lines and the ENDPOINTS value it printed.
func script(ctx context.Context, name string, args ...string) (cmds []string, endpoints string, err error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join("scripts", name+".sh")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "+ "):
			cmds = append(cmds, strings.TrimPrefix(line, "+ "))
		case strings.HasPrefix(line, "ENDPOINTS="):
			endpoints = strings.TrimPrefix(line, "ENDPOINTS=")
		default:
			if strings.TrimSpace(line) != "" {
				cmds = append(cmds, line)
			}
		}
	}
	if err != nil {
		return cmds, "", fmt.Errorf("scripts/%s.sh %s: %w", name, strings.Join(args, " "), err)
	}
	return cmds, endpoints, nil
}

// benchConfig is the engine configuration of one workload, the same for
// every system (Baton's `baton bench` builds it from the same defaults).
func benchConfig(sys string, w workload, warmup, duration time.Duration) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.System, cfg.Workload, cfg.Workers = sys, w.kind, w.workers
	cfg.Warmup, cfg.Duration = warmup, duration
	cfg.Prefix = fmt.Sprintf("sidebyside/%s-%d", w.kind, w.workers)
	return cfg
}

// runInProcess drives a system through its Go client in this process.
func runInProcess(ctx context.Context, s system, endpoints string, w workload, warmup, duration time.Duration) result {
	res := result{sys: s, load: w, command: fmt.Sprintf("in-process bench.Run, workload %s, %d workers (%s)", w.kind, w.workers, s.module)}
	ctx, cancel := context.WithTimeout(ctx, warmup+duration+90*time.Second)
	defer cancel()
	r, err := bench.Run(ctx, benchConfig(s.id(), w, warmup, duration), s.factory(endpoints))
	if err != nil {
		res.note = err.Error()
		return res
	}
	res.report = r
	return res
}

// errNoBench means the baton binary has no bench command yet.
var errNoBench = errors.New("this build of baton has no `bench` command")

// batonArgs are the arguments of `baton bench` for one workload. They
// name --conns whatever the variant, so that the command says how the
// workers reach the cluster and builds with another default measure the
// same.
func batonArgs(s system, endpoints string, w workload, warmup, duration time.Duration) []string {
	conns := w.workers
	if s.shared {
		conns = 1
	}
	return []string{"bench", "--endpoints", endpoints, "--workload", w.kind, "--workers", strconv.Itoa(w.workers),
		"--conns", strconv.Itoa(conns), "--duration", duration.String(), "--warmup", warmup.String(), "--json"}
}

// runBaton runs `baton bench` against the cluster and parses its JSON.
func runBaton(ctx context.Context, s system, bin, endpoints string, w workload, warmup, duration time.Duration) (result, error) {
	args := batonArgs(s, endpoints, w, warmup, duration)
	res := result{sys: s, load: w, command: "baton " + strings.Join(args, " ")}
	ctx, cancel := context.WithTimeout(ctx, warmup+duration+90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if strings.Contains(stderr.String(), `unknown command "bench"`) {
		res.note = errNoBench.Error()
		return res, errNoBench
	}
	r, perr := parseReport(stdout.Bytes())
	if err != nil || perr != nil {
		msg := lastLine(stderr.String())
		if err == nil {
			msg = perr.Error()
		} else if msg == "" {
			msg = err.Error()
		}
		res.note = "baton bench failed: " + msg
		return res, nil
	}
	r.System = s.id()
	res.report = r
	return res, nil
}

// parseReport finds the bench.Report JSON object in out (the last one if
// there are several lines of JSON).
func parseReport(out []byte) (*bench.Report, error) {
	var found *bench.Report
	for line := range bytes.Lines(out) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r bench.Report
		if err := json.Unmarshal(line, &r); err == nil {
			found = &r
		}
	}
	if found == nil {
		// Perhaps indented JSON over several lines.
		if i := bytes.IndexByte(out, '{'); i >= 0 {
			var r bench.Report
			if err := json.NewDecoder(bytes.NewReader(out[i:])).Decode(&r); err == nil {
				return &r, nil
			}
		}
		return nil, fmt.Errorf("no JSON report in the output %q", truncate(string(out), 200))
	}
	return found, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
