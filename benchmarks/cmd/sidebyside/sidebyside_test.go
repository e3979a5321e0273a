package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/bench"
)

func TestParseWorkloads(t *testing.T) {
	tests := []struct {
		name, in string
		want     []workload
		bad      bool
	}{
		{name: "default", in: "own/1,own/64,hot/16,zipf/64", want: []workload{{"own", 1}, {"own", 64}, {"hot", 16}, {"zipf", 64}}},
		{name: "spaces", in: " hot/16 ", want: []workload{{"hot", 16}}},
		{name: "no workers", in: "own", bad: true},
		{name: "zero workers", in: "own/0", bad: true},
		{name: "batch is not side by side", in: "batch/4", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWorkloads(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("accepted %q", tt.in)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestParseReport(t *testing.T) {
	tests := []struct {
		name, out string
		cycles    uint64
		bad       bool
	}{
		{name: "one line", out: `{"system":"baton","cycles":7}` + "\n", cycles: 7},
		{name: "after a log line", out: "connected\n" + `{"cycles":8}`, cycles: 8},
		{name: "indented", out: "{\n  \"cycles\": 9\n}\n", cycles: 9},
		{name: "none", out: "usage: baton bench\n", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseReport([]byte(tt.out))
			if tt.bad {
				if err == nil {
					t.Fatalf("parsed %q", tt.out)
				}
				return
			}
			if err != nil || r.Cycles != tt.cycles {
				t.Fatalf("got %+v, %v", r, err)
			}
		})
	}
}

func TestRenderAndCharts(t *testing.T) {
	loads := []workload{{"own", 1}, {"hot", 16}}
	rep := func(sys string, w workload, cps float64) *bench.Report {
		return &bench.Report{System: sys, Workload: w.kind, Workers: w.workers, CyclesPerSec: cps, Cycles: uint64(cps) * 2,
			AcquireP50: 1000 / cps, AcquireP99: 3000 / cps, PerWorkerMin: uint64(cps) * 2 / uint64(w.workers), PerWorkerMax: uint64(cps) * 2 / uint64(w.workers)}
	}
	d := &doc{generated: time.Unix(0, 0).UTC(), args: []string{"-quick"}, quick: true, warmup: time.Second / 2, duration: 2 * time.Second,
		dir: "/tmp/x", machine: machine{cpu: "Test CPU", cores: 2}, clients: map[string]string{}, versions: map[string]string{},
		startCmds: map[string][]string{"etcd": {"etcd --data-dir /tmp/x/etcd/e1"}}, loads: loads, systems: systems[:2], chart: "benchmarks"}
	for _, w := range loads {
		d.results = append(d.results, result{sys: systems[0], load: w, report: rep("baton", w, 4000), command: "baton bench --workload " + w.kind})
		d.results = append(d.results, result{sys: systems[1], load: w, report: rep("etcd", w, 400)})
	}
	md := render(d)
	for _, want := range []string{"quick run", "| own/1 | Baton | 4,000 |", "| own/1 | 10× / 10× |", "$DIR/etcd/e1", "## Targets of issue 5",
		"16 workers, one key: ≥ 5× etcd's handoffs/s | 10× | yes", "![Throughput and acquire p99 per system and workload](benchmarks.svg)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	// A missing Baton is shown as not run, and a rewrite keeps the tail.
	d.results[0] = result{sys: systems[0], load: loads[0], note: "not run: " + errNoBench.Error()}
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	os.WriteFile(path, []byte("old\n"+keepMarker+"\n\nmy notes\n"), 0o644)
	if err := writeDoc(path, d); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "not run: this build") || !strings.HasSuffix(string(b), keepMarker+"\n\nmy notes\n") || strings.HasPrefix(string(b), "old") {
		t.Errorf("rewritten report:\n%s", b)
	}
	if err := writeCharts(filepath.Join(dir, "benchmarks"), d); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".svg", ".png"} {
		if fi, err := os.Stat(filepath.Join(dir, "benchmarks"+ext)); err != nil || fi.Size() == 0 {
			t.Errorf("chart %s: %v", ext, err)
		}
	}
}

// TestRenderRounds: with several rounds, the table shows each system's
// median round and the ratios are per round, as median and range.
func TestRenderRounds(t *testing.T) {
	w := workload{"own", 64}
	rep := func(sys string, cps float64) *bench.Report {
		return &bench.Report{System: sys, Workload: w.kind, Workers: w.workers, CyclesPerSec: cps, AcquireP50: 1000 / cps}
	}
	d := &doc{generated: time.Unix(0, 0).UTC(), rounds: 3, machine: machine{cores: 2}, clients: map[string]string{},
		versions: map[string]string{}, startCmds: map[string][]string{}, loads: []workload{w}, systems: systems[:2]}
	for i, cps := range [][2]float64{{4000, 400}, {5000, 400}, {3000, 500}} {
		d.results = append(d.results,
			result{sys: systems[0], load: w, report: rep("baton", cps[0]), round: i + 1, command: "baton bench"},
			result{sys: systems[1], load: w, report: rep("etcd", cps[1]), round: i + 1})
	}
	if got := d.find("baton", w).report.CyclesPerSec; got != 4000 {
		t.Errorf("Baton's median round: %v cycles/s, want 4000", got)
	}
	md := render(d)
	for _, want := range []string{"**3 rounds:**", "| own/64 | Baton | 4,000 |", "| own/64 | etcd | 400 |", "| own/64 | 10× (6×–12×) / ",
		"≥ 10× etcd's cycles/s | 10× (6×–12×), reached in 2 of 3 rounds | yes", `{"round":3,"system":"baton"`} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "$DIR/baton/baton bench"); n != 1 {
		t.Errorf("Baton's command listed %d times, want once (round 1)", n)
	}
}
