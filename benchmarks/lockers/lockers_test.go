package lockers

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/bench"
)

// Each live test runs only when its server's address is in the
// environment, e.g. after `scripts/redis.sh start DIR`:
//
//	BENCH_REDIS=127.0.0.1:26379 go test ./lockers
//
// They check that the driver locks and releases without errors, not how
// fast: benchmarks carry no timed assertions.
func TestLive(t *testing.T) {
	systems := []struct {
		env     string
		factory func(string) bench.Factory
	}{
		{"BENCH_ETCD", func(e string) bench.Factory { return Etcd(strings.Split(e, ",")) }},
		{"BENCH_ETCD/shared", func(e string) bench.Factory { return EtcdShared(strings.Split(e, ",")) }},
		{"BENCH_ZOOKEEPER", func(e string) bench.Factory { return ZooKeeper(strings.Split(e, ",")) }},
		{"BENCH_REDIS", Redis},
		{"BENCH_POSTGRES", func(e string) bench.Factory { return Postgres("postgres://postgres@" + e + "/postgres") }},
	}
	for _, s := range systems {
		t.Run(s.env, func(t *testing.T) {
			env, _, _ := strings.Cut(s.env, "/")
			e := os.Getenv(env)
			if e == "" {
				t.Skipf("%s not set", env)
			}
			for _, wl := range []string{bench.OwnKeys, bench.HotKey, bench.Zipf} {
				cfg := bench.DefaultConfig()
				cfg.System, cfg.Workload, cfg.Workers = s.env, wl, 4
				cfg.Duration, cfg.Warmup = 300*time.Millisecond, 100*time.Millisecond
				cfg.Prefix = "test-" + time.Now().Format("150405.000")
				r, err := bench.Run(context.Background(), cfg, s.factory(e))
				if err != nil {
					t.Fatal(err)
				}
				if r.Cycles == 0 || r.Errors != 0 {
					t.Errorf("%s: %d cycles, %d errors (first: %s)", wl, r.Cycles, r.Errors, r.FirstError)
				}
			}
		})
	}
}

func TestAdvisoryKey(t *testing.T) {
	if AdvisoryKey("a") == AdvisoryKey("b") || AdvisoryKey("x") != AdvisoryKey("x") {
		t.Fatal("AdvisoryKey is not a stable hash")
	}
}

// TestSharedClient: the first worker dials the one client, later ones
// reuse it, and the last to release it closes it; a failed dial leaves
// nothing to close and the next worker dials again.
func TestSharedClient(t *testing.T) {
	dials, closes := 0, 0
	fail := true
	s := &sharedClient[int]{
		dial: func(context.Context) (int, error) {
			if fail {
				return 0, errors.New("refused")
			}
			dials++
			return dials, nil
		},
		close: func(c int) error {
			if c != dials {
				t.Errorf("closed client %d, want %d", c, dials)
			}
			closes++
			return nil
		},
	}
	ctx := context.Background()
	if _, err := s.acquire(ctx); err == nil {
		t.Fatal("acquire took a failed dial")
	}
	fail = false
	for i := range 3 {
		if c, err := s.acquire(ctx); err != nil || c != 1 {
			t.Fatalf("worker %d got client %d, %v; want the one client, 1", i, c, err)
		}
	}
	for i := range 3 {
		if closes != 0 {
			t.Fatalf("client closed with %d workers still on it", 3-i)
		}
		s.release()
	}
	if dials != 1 || closes != 1 {
		t.Fatalf("%d dials and %d closes for three workers; want 1 and 1", dials, closes)
	}
	if c, err := s.acquire(ctx); err != nil || c != 2 {
		t.Fatalf("after the last release, acquire got client %d, %v; want a new one, 2", c, err)
	}
}
