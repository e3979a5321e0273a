package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/report"
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
		dir: "/tmp/x", machine: report.Machine{CPU: "Test CPU", Cores: 2}, clients: map[string]string{}, versions: map[string]string{},
		startCmds: map[string][]string{"etcd": {"etcd --data-dir /tmp/x/etcd/e1"}}, loads: loads, systems: systems[:2], chart: "benchmarks"}
	for _, w := range loads {
		d.results = append(d.results, result{sys: systems[0], load: w, report: rep("baton", w, 4000), command: "baton bench --workload " + w.kind})
		d.results = append(d.results, result{sys: systems[1], load: w, report: rep("etcd", w, 400)})
	}
	md := render(d)
	for _, want := range []string{"quick run", "| own/1 | Baton | 4,000 |", "| own/1 | 10× / 10× |", "$DIR/etcd/e1", "## Targets of issue 25",
		"16 workers, one key: ≥ 10× etcd's handoffs/s | 10× | yes", "**Variant: one connection per worker.**", "![Throughput and acquire p99 per system and workload](benchmarks.svg)"} {
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
	d := &doc{generated: time.Unix(0, 0).UTC(), rounds: 3, machine: report.Machine{Cores: 2}, clients: map[string]string{},
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

func TestParseSystems(t *testing.T) {
	got, err := parseSystems("baton, etcd,baton/shared,etcd/shared,redis")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.id())
	}
	if want := "baton,etcd,baton/shared,etcd/shared,redis"; strings.Join(ids, ",") != want {
		t.Fatalf("parsed %v, want %s", ids, want)
	}
	if v := got[3]; !v.shared || v.label() != "etcd, shared connection" || v.factory == nil || !strings.Contains(v.recipe, "all on one client") {
		t.Errorf("etcd/shared is %+v", v)
	}
	if s := got[1]; s.shared || s.label() != "etcd" || !strings.Contains(s.recipe, "one client and one session (60 s lease) per worker") {
		t.Errorf("etcd is %+v", s)
	}
	if strings.Join(sharedIDs(), ",") != "baton/shared,etcd/shared" {
		t.Errorf("shared-connection variants: %v", sharedIDs())
	}
	for in, why := range map[string]string{
		"zookeeper/shared": "a ZooKeeper session is its connection",
		"redis/shared":     "one command at a time",
		"postgres/shared":  "one statement at a time",
		"mysql":            "unknown system",
		"baton,baton":      "listed twice",
	} {
		if _, err := parseSystems(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("parseSystems(%q) = %v; want an error saying %q", in, err, why)
		}
	}
}

// TestBatonArgs: the command names --conns in both variants, so that it
// says how the workers reach the cluster whatever the build's default.
func TestBatonArgs(t *testing.T) {
	shared, err := systems[0].variant()
	if err != nil {
		t.Fatal(err)
	}
	w := workload{"own", 64}
	for _, tt := range []struct {
		s    system
		want string
	}{
		{systems[0], "--workers 64 --conns 64 "},
		{shared, "--workers 64 --conns 1 "},
	} {
		if got := strings.Join(batonArgs(tt.s, "e", w, time.Second, 2*time.Second), " "); !strings.Contains(got, tt.want) {
			t.Errorf("%s: baton %s; want %q in it", tt.s.id(), got, tt.want)
		}
	}
}

// TestRenderVariants: with the shared-connection variant in the run, its
// rows are labelled, Baton is compared with each system within a variant,
// and the targets use the like-for-like rows only.
func TestRenderVariants(t *testing.T) {
	w := workload{"own", 64}
	ss, err := parseSystems("baton,etcd,baton/shared,etcd/shared")
	if err != nil {
		t.Fatal(err)
	}
	rep := func(sys string, cps float64) *bench.Report {
		return &bench.Report{System: sys, Workload: w.kind, Workers: w.workers, CyclesPerSec: cps, AcquireP50: 1000 / cps}
	}
	d := &doc{generated: time.Unix(0, 0).UTC(), machine: report.Machine{Cores: 2}, clients: map[string]string{}, versions: map[string]string{},
		startCmds: map[string][]string{"baton": {"baton server --name n1"}}, loads: []workload{w}, systems: ss}
	for i, cps := range []float64{10000, 2000, 20000, 2500} {
		d.results = append(d.results, result{sys: ss[i], load: w, report: rep(ss[i].id(), cps), round: 1,
			command: "baton " + strings.Join(batonArgs(ss[i], "e", w, time.Second, time.Second), " ")})
	}
	md := render(d)
	for _, want := range []string{
		"**Variants:** rows named *…, shared connection*",
		"also has the **shared-connection variant** (`baton/shared`, `etcd/shared`)",
		"ZooKeeper (a ZooKeeper session is its connection",
		"| own/64 | Baton | 10,000 |", "| own/64 | Baton, shared connection | 20,000 |", "| own/64 | etcd, shared connection | 2,500 |",
		"## Baton against each system\n\nEvery system with one connection and one session per worker.",
		"| own/64 | 5× / 5× |",
		"## Baton against each system, shared connection\n",
		"| own/64 | 8× / 8× |",
		"≥ 10× etcd's cycles/s | 5× | **no**",
		"$DIR/baton/baton bench --endpoints e --workload own --workers 64 --conns 64 ",
		"$DIR/shared/baton/baton bench --endpoints e --workload own --workers 64 --conns 1 ",
		`"system":"etcd/shared"`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "baton server --name n1"); n != 1 {
		t.Errorf("Baton's servers listed %d times, want once for both variants", n)
	}
}
