// Package bench is the workload engine behind `baton bench` and the
// side-by-side benchmarks in benchmarks/: the same workloads, timing and
// report for every lock system, so their figures compare.
//
// A cycle is one acquire plus one release. Workers run closed loops (the
// next acquire starts when the previous release returned). Latencies are
// recorded after the warm-up only.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Locker is one worker's connection to a lock system.
type Locker interface {
	// Acquire blocks until name is held (or ctx ends) and returns the
	// fencing token if the system has one (0 otherwise).
	Acquire(ctx context.Context, name string) (uint64, error)
	// Release releases name, held by this Locker.
	Release(ctx context.Context, name string) error
	Close() error
}

// BatchLocker is implemented by systems with a batch try-lock.
type BatchLocker interface {
	// TryAcquireMany tries every name at once and returns those it got.
	TryAcquireMany(ctx context.Context, names []string) ([]string, error)
}

// Factory makes the Locker of worker i.
type Factory func(ctx context.Context, worker int) (Locker, error)

// Workloads.
const (
	OwnKeys = "own"   // every worker on its own key
	HotKey  = "hot"   // every worker on one key: handoffs
	Zipf    = "zipf"  // keys drawn from a Zipf distribution over Keys keys
	Batch   = "batch" // try-lock BatchSize keys at once, release those got
	Hold    = "hold"  // own keys, holding each lock for Hold
)

// Config describes one run.
type Config struct {
	System    string
	Workload  string
	Workers   int
	Duration  time.Duration
	Warmup    time.Duration
	Keys      int     // key space of zipf and batch
	ZipfS     float64 // Zipf exponent (> 1)
	BatchSize int
	Hold      time.Duration
	Prefix    string // key prefix, so runs do not collide
	Seed      uint64
}

// DefaultConfig is 16 workers on their own keys for 10 s after 2 s warm-up.
func DefaultConfig() Config {
	return Config{Workload: OwnKeys, Workers: 16, Duration: 10 * time.Second, Warmup: 2 * time.Second,
		Keys: 1000, ZipfS: 1.1, BatchSize: 100, Prefix: "bench", Seed: 1}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case !slices.Contains([]string{OwnKeys, HotKey, Zipf, Batch, Hold}, c.Workload):
		return fmt.Errorf("unknown workload %q: want own, hot, zipf, batch or hold", c.Workload)
	case c.Workers < 1 || c.Workers > 10000:
		return fmt.Errorf("workers is %d; want 1..10000", c.Workers)
	case c.Duration <= 0:
		return errors.New("duration must be positive")
	case c.Warmup < 0:
		return errors.New("warm-up must not be negative")
	case (c.Workload == Zipf || c.Workload == Batch) && c.Keys < 1:
		return errors.New("keys must be positive")
	case c.Workload == Zipf && c.ZipfS <= 1:
		return errors.New("zipf exponent must be > 1")
	case c.Workload == Batch && (c.BatchSize < 1 || c.BatchSize > c.Keys):
		return fmt.Errorf("batch size %d must be in 1..keys (%d)", c.BatchSize, c.Keys)
	}
	return nil
}

// Report is the result of a run; JSON field names are part of the
// benchmarks' contract.
type Report struct {
	System       string  `json:"system"`
	Workload     string  `json:"workload"`
	Workers      int     `json:"workers"`
	Seconds      float64 `json:"seconds"`
	Cycles       uint64  `json:"cycles"`
	CyclesPerSec float64 `json:"cycles_per_sec"`
	AcquireP50   float64 `json:"acquire_p50_ms"`
	AcquireP99   float64 `json:"acquire_p99_ms"`
	AcquireP999  float64 `json:"acquire_p999_ms"`
	ReleaseP50   float64 `json:"release_p50_ms"`
	ReleaseP99   float64 `json:"release_p99_ms"`
	PerWorkerMin uint64  `json:"per_worker_min"`
	PerWorkerMax uint64  `json:"per_worker_max"`
	Errors       uint64  `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
	// LocksPerCycle is how many locks one cycle takes (batch: the mean
	// number granted per try).
	LocksPerCycle float64 `json:"locks_per_cycle"`
}

type worker struct {
	acq, rel []time.Duration
	cycles   uint64
	locks    uint64
	errors   uint64
	firstErr error
	pause    time.Duration // before the next try after an error; 0 after a success
}

// Error pauses: a worker whose calls fail (a session that expired, a
// system that went away) waits between tries, from minErrorPause doubling
// up to maxErrorPause, instead of spinning on errors and taking the cores
// from everything else on the machine (one did 47 million failed calls in
// 8 s).
const (
	minErrorPause = time.Millisecond
	maxErrorPause = 100 * time.Millisecond
)

// Run runs cfg against the system that factory connects to. It leaves
// the Go runtime's settings as the process has them: a benchmark measures
// the runtime as shipped.
func Run(ctx context.Context, cfg Config, factory Factory) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lockers := make([]Locker, cfg.Workers)
	for i := range lockers {
		l, err := factory(ctx, i)
		if err != nil {
			for _, o := range lockers[:i] {
				o.Close()
			}
			return nil, fmt.Errorf("connect worker %d: %w", i, err)
		}
		lockers[i] = l
	}
	defer func() {
		for _, l := range lockers {
			l.Close()
		}
	}()
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end.Add(30*time.Second))
	defer cancel()
	workers := make([]*worker, cfg.Workers)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{}
		workers[i] = w
		wg.Go(func() { w.loop(runCtx, cfg, i, lockers[i], measureFrom, end) })
	}
	wg.Wait()
	return summarise(cfg, workers), nil
}

func (w *worker) fail(err error) {
	w.errors++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// backOff waits after a failed call, until end at most.
func (w *worker) backOff(ctx context.Context, end time.Time) {
	w.pause = min(max(2*w.pause, minErrorPause), maxErrorPause)
	t := time.NewTimer(min(w.pause, time.Until(end)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (w *worker) loop(ctx context.Context, cfg Config, id int, l Locker, from, end time.Time) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)))
	var zipf *rand.Zipf
	if cfg.Workload == Zipf {
		zipf = rand.NewZipf(rng, cfg.ZipfS, 1, uint64(cfg.Keys-1))
	}
	own := fmt.Sprintf("%s/own/%d", cfg.Prefix, id)
	for {
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			return
		}
		measure := !now.Before(from)
		if cfg.Workload == Batch {
			w.batch(ctx, cfg, rng, l, measure, end)
			continue
		}
		name := own
		switch cfg.Workload {
		case HotKey:
			name = cfg.Prefix + "/hot"
		case Zipf:
			name = fmt.Sprintf("%s/zipf/%d", cfg.Prefix, zipf.Uint64())
		}
		t0 := time.Now()
		if _, err := l.Acquire(ctx, name); err != nil {
			if measure {
				w.fail(err)
			}
			w.backOff(ctx, end)
			continue
		}
		t1 := time.Now()
		if cfg.Workload == Hold && cfg.Hold > 0 {
			time.Sleep(cfg.Hold)
		}
		t2 := time.Now()
		err := l.Release(ctx, name)
		t3 := time.Now()
		if !measure || t3.After(end) {
			continue
		}
		if err != nil {
			w.fail(err)
			w.backOff(ctx, end)
			continue
		}
		w.pause = 0
		w.acq = append(w.acq, t1.Sub(t0))
		w.rel = append(w.rel, t3.Sub(t2))
		w.cycles++
		w.locks++
	}
}

func (w *worker) batch(ctx context.Context, cfg Config, rng *rand.Rand, l Locker, measure bool, end time.Time) {
	bl, ok := l.(BatchLocker)
	names := make([]string, cfg.BatchSize)
	for i, k := range rng.Perm(cfg.Keys)[:cfg.BatchSize] {
		names[i] = fmt.Sprintf("%s/batch/%d", cfg.Prefix, k)
	}
	t0 := time.Now()
	var got []string
	var err error
	if ok {
		got, err = bl.TryAcquireMany(ctx, names)
	} else {
		err = errors.New("system has no batch try-lock")
	}
	t1 := time.Now()
	if err != nil {
		if measure {
			w.fail(err)
		}
		w.backOff(ctx, end)
		return
	}
	for _, n := range got {
		if rerr := l.Release(ctx, n); rerr != nil && err == nil {
			err = rerr
		}
	}
	t2 := time.Now()
	if !measure {
		return
	}
	if err != nil {
		w.fail(err)
		w.backOff(ctx, end)
		return
	}
	w.pause = 0
	w.acq = append(w.acq, t1.Sub(t0))
	w.rel = append(w.rel, t2.Sub(t1))
	w.cycles++
	w.locks += uint64(len(got))
}

func summarise(cfg Config, ws []*worker) *Report {
	r := &Report{System: cfg.System, Workload: cfg.Workload, Workers: cfg.Workers, Seconds: cfg.Duration.Seconds()}
	var acq, rel []time.Duration
	var locks uint64
	r.PerWorkerMin = math.MaxUint64
	for _, w := range ws {
		acq = append(acq, w.acq...)
		rel = append(rel, w.rel...)
		r.Cycles += w.cycles
		locks += w.locks
		r.Errors += w.errors
		r.PerWorkerMin = min(r.PerWorkerMin, w.cycles)
		r.PerWorkerMax = max(r.PerWorkerMax, w.cycles)
		if w.firstErr != nil && r.FirstError == "" {
			r.FirstError = w.firstErr.Error()
		}
	}
	r.CyclesPerSec = float64(r.Cycles) / cfg.Duration.Seconds()
	if r.Cycles > 0 {
		r.LocksPerCycle = float64(locks) / float64(r.Cycles)
	}
	r.AcquireP50, r.AcquireP99, r.AcquireP999 = pct(acq, 0.50), pct(acq, 0.99), pct(acq, 0.999)
	r.ReleaseP50, r.ReleaseP99 = pct(rel, 0.50), pct(rel, 0.99)
	return r
}

// pct is the q-quantile of ds in milliseconds (0 when empty).
func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	i = max(0, min(i, len(ds)-1))
	return float64(ds[i]) / float64(time.Millisecond)
}

// Table renders reports as an aligned text table.
func Table(rs []*Report) string {
	s := fmt.Sprintf("%-10s %-6s %7s %12s %9s %9s %9s %9s %11s %7s\n",
		"system", "load", "workers", "cycles/s", "acq p50", "acq p99", "rel p50", "rel p99", "per-worker", "errors")
	for _, r := range rs {
		s += fmt.Sprintf("%-10s %-6s %7d %12.0f %8.2fms %8.2fms %8.2fms %8.2fms %5d-%-5d %7d\n",
			r.System, r.Workload, r.Workers, r.CyclesPerSec, r.AcquireP50, r.AcquireP99, r.ReleaseP50, r.ReleaseP99,
			r.PerWorkerMin, r.PerWorkerMax, r.Errors)
	}
	return s
}
