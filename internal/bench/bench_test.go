package bench

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memLocks is an in-process lock table: enough to test the engine.
type memLocks struct {
	mu    sync.Mutex
	held  map[string]bool
	cond  *sync.Cond
	token uint64
}

func newMemLocks() *memLocks {
	m := &memLocks{held: map[string]bool{}}
	m.cond = sync.NewCond(&m.mu)
	return m
}

type memLocker struct{ m *memLocks }

func (l memLocker) Acquire(ctx context.Context, name string) (uint64, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	for l.m.held[name] {
		l.m.cond.Wait()
	}
	l.m.held[name] = true
	l.m.token++
	return l.m.token, nil
}

func (l memLocker) Release(ctx context.Context, name string) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.held, name)
	l.m.cond.Broadcast()
	return nil
}

func (l memLocker) TryAcquireMany(ctx context.Context, names []string) ([]string, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	var got []string
	for _, n := range names {
		if !l.m.held[n] {
			l.m.held[n] = true
			got = append(got, n)
		}
	}
	return got, nil
}

func (memLocker) Close() error { return nil }

func TestRunWorkloads(t *testing.T) {
	for _, wl := range []string{OwnKeys, HotKey, Zipf, Batch, Hold} {
		t.Run(wl, func(t *testing.T) {
			m := newMemLocks()
			cfg := DefaultConfig()
			cfg.System, cfg.Workload, cfg.Workers = "mem", wl, 4
			cfg.Duration, cfg.Warmup = 50*time.Millisecond, 10*time.Millisecond
			cfg.Hold = time.Millisecond
			r, err := Run(context.Background(), cfg, func(context.Context, int) (Locker, error) { return memLocker{m}, nil })
			if err != nil {
				t.Fatal(err)
			}
			if r.Cycles == 0 || r.Errors != 0 || r.PerWorkerMin > r.PerWorkerMax {
				t.Fatalf("report %+v", r)
			}
			b, _ := json.Marshal(r)
			for _, k := range []string{"cycles_per_sec", "acquire_p50_ms", "acquire_p99_ms", "release_p50_ms", "release_p99_ms", "per_worker_min", "per_worker_max", "errors"} {
				if !strings.Contains(string(b), `"`+k+`"`) {
					t.Fatalf("JSON lacks %s: %s", k, b)
				}
			}
		})
	}
}

// failing is a system whose every call fails at once, as a session that
// expired does; it counts the calls.
type failing struct{ calls *atomic.Int64 }

var errExpired = errors.New("session expired")

func (f failing) Acquire(context.Context, string) (uint64, error) {
	f.calls.Add(1)
	return 0, errExpired
}
func (f failing) Release(context.Context, string) error { f.calls.Add(1); return errExpired }
func (f failing) TryAcquireMany(context.Context, []string) ([]string, error) {
	f.calls.Add(1)
	return nil, errExpired
}
func (failing) Close() error { return nil }

// A worker whose calls fail pauses between them (up to maxErrorPause)
// instead of spinning: in 300 ms a spinning worker made about 10,000
// calls here, a pausing one about ten (one a millisecond would be 300).
func TestErrorsPause(t *testing.T) {
	for _, wl := range []string{OwnKeys, Batch} {
		var calls atomic.Int64
		cfg := DefaultConfig()
		cfg.System, cfg.Workload, cfg.Workers = "failing", wl, 1
		cfg.Duration, cfg.Warmup = 300*time.Millisecond, 0
		r, err := Run(context.Background(), cfg, func(context.Context, int) (Locker, error) { return failing{&calls}, nil })
		if err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n > 300 || r.Errors == 0 || r.FirstError != errExpired.Error() {
			t.Errorf("%s: %d calls, %d errors (first %q) in 300 ms", wl, n, r.Errors, r.FirstError)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Workload = "nope" },
		func(c *Config) { c.Workers = 0 },
		func(c *Config) { c.Duration = 0 },
		func(c *Config) { c.Workload, c.ZipfS = Zipf, 1 },
		func(c *Config) { c.Workload, c.BatchSize = Batch, c.Keys+1 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5 * time.Millisecond, 1 * time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	if got := pct(ds, 0.5); got != 3 {
		t.Fatalf("p50 = %v, want 3", got)
	}
	if got := pct(ds, 0.99); got != 5 {
		t.Fatalf("p99 = %v, want 5", got)
	}
}
