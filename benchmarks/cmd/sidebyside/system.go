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
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/benchmarks/lockers"
	"github.com/batonlock/baton/internal/bench"
)

// system is one lock service under test.
type system struct {
	name   string // also the script's name: scripts/<name>.sh
	title  string
	setup  string // servers and durability, for the doc
	recipe string // how a worker locks, for the doc
	module string // Go client module (empty: Baton's own `baton bench`)
	// factory connects workers to the endpoints the script printed; nil
	// for Baton, whose load comes from `baton bench`.
	factory func(endpoints string) bench.Factory
}

// systems are listed in the order of the tables.
var systems = []system{
	{
		name: "baton", title: "Baton",
		setup:  "3 nodes (`baton server`), fsync on (its default)",
		recipe: "`baton bench` with its defaults: the product's Go client, one session per worker, one client for all workers, whose sessions share one connection and one Sessions stream (`--conns 1`)",
	},
	{
		name: "etcd", title: "etcd",
		setup:  "3 members (Debian etcd-server), fsync on (its default)",
		recipe: "concurrency.Mutex, one client and one session (60 s lease) per worker",
		module: "go.etcd.io/etcd/client/v3",
		factory: func(e string) bench.Factory {
			return lockers.Etcd(strings.Split(e, ","))
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
	},
	{
		name: "redis", title: "Redis",
		setup:  "1 node (Debian redis-server), no RDB, no AOF: nothing is fsynced",
		recipe: "SET NX PX 30s, retried after 50 µs..2 ms jittered backoff; Lua compare-and-delete release; one connection per worker",
		module: "github.com/redis/go-redis/v9",
		factory: func(e string) bench.Factory {
			return lockers.Redis(e)
		},
	},
	{
		name: "postgres", title: "PostgreSQL",
		setup:  "1 node (Debian postgresql), defaults; advisory locks live in memory, not in the WAL",
		recipe: "pg_advisory_lock / pg_advisory_unlock on a 64-bit hash of the name, one connection per worker",
		module: "github.com/jackc/pgx/v5",
		factory: func(e string) bench.Factory {
			return lockers.Postgres("postgres://postgres@" + e + "/postgres?sslmode=disable")
		},
	},
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
	r, err := bench.Run(ctx, benchConfig(s.name, w, warmup, duration), s.factory(endpoints))
	if err != nil {
		res.note = err.Error()
		return res
	}
	res.report = r
	return res
}

// errNoBench means the baton binary has no bench command yet.
var errNoBench = errors.New("this build of baton has no `bench` command")

// batonArgs are the arguments of `baton bench` for one workload.
func batonArgs(endpoints string, w workload, warmup, duration time.Duration) []string {
	return []string{"bench", "--endpoints", endpoints, "--workload", w.kind, "--workers", strconv.Itoa(w.workers),
		"--duration", duration.String(), "--warmup", warmup.String(), "--json"}
}

// runBaton runs `baton bench` against the cluster and parses its JSON.
func runBaton(ctx context.Context, bin, endpoints string, w workload, warmup, duration time.Duration) (result, error) {
	args := batonArgs(endpoints, w, warmup, duration)
	res := result{sys: systems[0], load: w, command: "baton " + strings.Join(args, " ")}
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
	if r.System == "" {
		r.System = "baton"
	}
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
