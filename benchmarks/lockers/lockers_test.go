package lockers

import (
	"context"
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
		{"BENCH_ZOOKEEPER", func(e string) bench.Factory { return ZooKeeper(strings.Split(e, ",")) }},
		{"BENCH_REDIS", Redis},
		{"BENCH_POSTGRES", func(e string) bench.Factory { return Postgres("postgres://postgres@" + e + "/postgres") }},
	}
	for _, s := range systems {
		t.Run(s.env, func(t *testing.T) {
			e := os.Getenv(s.env)
			if e == "" {
				t.Skipf("%s not set", s.env)
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
