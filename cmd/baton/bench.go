package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/bench"
)

func runBench(g globals, args []string) int {
	cfg := bench.DefaultConfig()
	cfg.System = "baton"
	ttl := 10 * time.Second
	conns := 0 // one client per worker
	fs := newFlagSet("bench", "bench [--workload own|hot|zipf|batch|hold] [--workers N] [--duration D] [flags]",
		"baton bench --workload hot --workers 16 --duration 10s --json", &g)
	fs.StringVar(&cfg.Workload, "workload", cfg.Workload, "own (each worker its own key), hot (one key), zipf, batch (try-lock many), hold")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent workers, each with its own session")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before it")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "key space of zipf and batch")
	fs.Float64Var(&cfg.ZipfS, "zipf", cfg.ZipfS, "zipf exponent (> 1)")
	fs.IntVar(&cfg.BatchSize, "batch", cfg.BatchSize, "locks per batch try-lock")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "how long the hold workload keeps each lock")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "lock name prefix")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the key choices")
	fs.DurationVar(&ttl, "ttl", ttl, "session TTL of the workers")
	fs.IntVar(&conns, "conns", conns, "clients the workers' sessions are spread over, each with one connection and one Sessions stream per member it talks to; "+
		"0, the default, is one client per worker, as a fleet of processes has; 1 puts every worker's session on one shared connection")
	var cpuProfile, memProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the load generator's CPU profile (pprof) to this file")
	fs.StringVar(&memProfile, "memprofile", "", "write the load generator's allocation profile (pprof, every allocation's site) to this file")
	pos, _, code, ok := parseCommand("bench", fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return exitCode("bench", usagef("unexpected argument %q", pos[0]))
	}
	if err := cfg.Validate(); err != nil {
		return exitCode("bench", usagef("%v", err))
	}
	nClients, err := benchClients(conns, cfg.Workers)
	if err != nil {
		return exitCode("bench", usagef("%v", err))
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return exitCode("bench", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return exitCode("bench", err)
		}
		defer pprof.StopCPUProfile()
	}
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return exitCode("bench", err)
		}
		defer f.Close()
		defer func() {
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintf(os.Stderr, "baton bench: memprofile: %v\n", err)
			}
		}()
	}
	ctx := context.Background()
	// The header goes to stderr with --json, whose stdout is the report only.
	header := os.Stdout
	if g.json {
		header = os.Stderr
	}
	fmt.Fprintf(header, "baton bench: %s, %s\n", cfg.Workload, clientsLine(cfg.Workers, nClients))
	clients := make([]*baton.Client, nClients)
	for i := range clients {
		dctx, cancel := context.WithTimeout(ctx, g.timeout)
		c, err := dialGlobals(dctx, g)
		cancel()
		if err != nil {
			return exitCode("bench", err)
		}
		defer c.Close()
		clients[i] = c
	}
	factory := func(ctx context.Context, i int) (bench.Locker, error) {
		sctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		s, err := clients[i%len(clients)].NewSession(sctx, baton.WithTTL(ttl), baton.WithOwner(fmt.Sprintf("bench/%d", i)))
		if err != nil {
			return nil, err
		}
		return &benchLocker{s: s, leases: map[string]*baton.Lease{}}, nil
	}
	r, err := bench.Run(ctx, cfg, factory)
	if err != nil {
		return exitCode("bench", err)
	}
	if g.json {
		if err := printJSON(r); err != nil {
			return exitCode("bench", err)
		}
	} else {
		fmt.Print(bench.Table([]*bench.Report{r}))
		if r.FirstError != "" {
			fmt.Fprintf(os.Stderr, "first error: %s\n", r.FirstError)
		}
	}
	return 0
}

// benchClients is how many clients --conns asks for with workers workers:
// 0 means one per worker; more clients than workers would sit idle.
func benchClients(conns, workers int) (int, error) {
	switch {
	case conns < 0:
		return 0, fmt.Errorf("--conns is %d; want 0 (one client per worker) or more", conns)
	case conns == 0:
		return workers, nil
	}
	return min(conns, workers), nil
}

// clientsLine says how the workers reach the cluster, for the header.
func clientsLine(workers, clients int) string {
	switch {
	case workers == 1:
		return "1 worker with its own client: its own connection and session (--conns 1)"
	case clients == workers:
		return fmt.Sprintf("%d workers, each with its own client: its own connection and session (--conns %d)", workers, clients)
	case clients == 1:
		return fmt.Sprintf("%d workers sharing one client: one connection and one Sessions stream for all their sessions (--conns 1)", workers)
	}
	return fmt.Sprintf("%d workers over %d clients: %d to %d sessions share each connection (--conns %d)",
		workers, clients, workers/clients, (workers+clients-1)/clients, clients)
}

// benchLocker is one bench worker: a session and its leases.
type benchLocker struct {
	s      *baton.Session
	mu     sync.Mutex
	leases map[string]*baton.Lease
}

func (b *benchLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	l, err := b.s.Mutex(name).Lock(ctx)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.leases[name] = l
	b.mu.Unlock()
	return l.Token(), nil
}

func (b *benchLocker) Release(ctx context.Context, name string) error {
	b.mu.Lock()
	l := b.leases[name]
	delete(b.leases, name)
	b.mu.Unlock()
	if l == nil {
		return fmt.Errorf("release %s: not held by this worker", name)
	}
	return l.Release(ctx)
}

func (b *benchLocker) TryAcquireMany(ctx context.Context, names []string) ([]string, error) {
	leases, _, err := b.s.TryLockMany(ctx, names...)
	if err != nil {
		return nil, err
	}
	got := make([]string, len(leases))
	b.mu.Lock()
	for i, l := range leases {
		b.leases[l.Name()] = l
		got[i] = l.Name()
	}
	b.mu.Unlock()
	return got, nil
}

func (b *benchLocker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.s.Close(ctx)
}
