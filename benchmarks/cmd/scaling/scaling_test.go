package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
	"github.com/batonlock/baton/internal/bench"
)

func TestParseClients(t *testing.T) {
	ns, err := parseClients("64, 1,1024,16")
	if err != nil || !slices.Equal(ns, []int{1, 16, 64, 1024}) {
		t.Fatalf("parseClients = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,2", "4,4", "10001", "-1"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("parseClients(%q) took it", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.build != "HEAD" || o.workload != "own" || !slices.Equal(o.clients, []int{1, 16, 64, 256, 1024}) ||
		o.rounds != 3 || o.duration != 5*time.Second || o.warmup != time.Second || o.out != "" || o.chart != "" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if o, err := parseFlags([]string{"-out", "../docs/BENCHMARKS.md"}, io.Discard); err != nil || o.chart != filepath.Join("..", "docs", "scaling") {
		t.Errorf("-out without -chart: chart %q, %v", o.chart, err)
	}
	// Every worker its own client, and every member the same connection limit.
	o, _ = parseFlags([]string{"-clients", "1,256"}, io.Discard)
	for _, n := range []int{1, 256} {
		r := o.run(n)
		if r.Workers != n || r.Conns != n || !r.LeaderFirst || !r.ExcludeSetup || !slices.Equal(r.ServerArgs, []string{"--max-client-conns", "868"}) {
			t.Errorf("run(%d) = %+v", n, r)
		}
	}
	for _, bad := range [][]string{
		{"-rounds", "0"}, {"-duration", "0s"}, {"-warmup", "-1s"}, {"-port", "80"}, {"-workload", "batch"}, {"-clients", "0"}, {"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) took it", bad)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	ns := []int{1, 16, 64}
	if got := roundOrder(ns, 1); !slices.Equal(got, ns) {
		t.Errorf("round 1: %v", got)
	}
	if got := roundOrder(ns, 2); !slices.Equal(got, []int{64, 16, 1}) || !slices.Equal(ns, []int{1, 16, 64}) {
		t.Errorf("round 2: %v (clients now %v)", got, ns)
	}
}

func TestCheckOpenFiles(t *testing.T) {
	// The benchmarks module does not link the server: read the constant
	// from its source.
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "embed", "limits.go"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\n\tReservedFiles = (\d+)\n`).FindSubmatch(src); m == nil || string(m[1]) != strconv.Itoa(reservedFiles) {
		t.Fatalf("reservedFiles is %d; embed/limits.go has %q", reservedFiles, m)
	}
	clients := []int{1, 1024}
	if err := checkOpenFiles(20000, clients); err != nil {
		t.Errorf("20,000 files for 1,024 clients: %v", err)
	}
	need := uint64(3*1024 + 100 + 1024)
	if err := checkOpenFiles(need, clients); err != nil {
		t.Errorf("exactly enough: %v", err)
	}
	err = checkOpenFiles(need-1, clients)
	if err == nil || !strings.Contains(err.Error(), "ulimit -n") || !strings.Contains(err.Error(), "4196") {
		t.Errorf("one file short: %v", err)
	}
}

func TestSplitSection(t *testing.T) {
	beginMarker, endMarker := markers(bench.OwnKeys)
	hotBegin, hotEnd := markers(bench.HotKey)
	doc := "# T\n\nbefore\n" + beginMarker + "\nold\n" + endMarker + "\nbetween\n" + hotBegin + "\nhot\n" + hotEnd + "\nafter\n"
	head, tail, err := splitSection(doc, "x.md", bench.OwnKeys)
	if err != nil || head != "# T\n\nbefore\n"+beginMarker || tail != endMarker+"\nbetween\n"+hotBegin+"\nhot\n"+hotEnd+"\nafter\n" {
		t.Fatalf("splitSection = %q, %q, %v", head, tail, err)
	}
	// Each workload's section is its own: hot/N's leaves own/N's alone.
	head, tail, err = splitSection(doc, "x.md", bench.HotKey)
	if err != nil || !strings.HasSuffix(head, "\nbetween\n"+hotBegin) || !strings.Contains(head, "\nold\n") || tail != hotEnd+"\nafter\n" {
		t.Fatalf("splitSection(hot) = %q, %q, %v", head, tail, err)
	}
	for _, bad := range []string{
		"no markers",
		beginMarker + "\n",
		endMarker + "\n" + beginMarker + "\n",
		beginMarker + beginMarker + endMarker,
	} {
		if _, _, err := splitSection(bad, "x.md", bench.OwnKeys); err == nil {
			t.Errorf("splitSection(%q) took it", bad)
		}
	}
}

func TestRows(t *testing.T) {
	m := func(cps, p50 float64, cpuUS, leadUS, leadSetupMS int) cluster.Measurement {
		return cluster.Measurement{Report: bench.Report{CyclesPerSec: cps, AcquireP50: p50, AcquireP99: 2 * p50},
			CPUPerCycle: time.Duration(cpuUS) * time.Microsecond, LeaderCPUPerCycle: time.Duration(leadUS) * time.Microsecond,
			LeaderSetupCPU: time.Duration(leadSetupMS) * time.Millisecond}
	}
	r := &result{opts: options{clients: []int{1, 64}, workload: "own", rounds: 3}, runs: map[int][]cluster.Measurement{
		1:  {m(900, 0.5, 90, 40, 100), m(1000, 0.6, 80, 30, 200), m(950, 0.4, 0, 35, 300)},
		64: {m(10000, 5, 60, 20, 640), m(12000, 4, 70, 25, 320), m(11000, 6, 65, 30, 90)}, // 90 ms: too few ticks to divide
	}}
	rows := r.rows()
	want := []row{
		{clients: 1, cycles: 950, cyclesMin: 900, cyclesMax: 1000, p50: 0.5, p99: 1, cpu: 0, leaderCPU: 35, leaderSession: 200000},
		{clients: 64, cycles: 11000, cyclesMin: 10000, cyclesMax: 12000, p50: 5, p99: 10, cpu: 65, leaderCPU: 25, leaderSession: 0},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows = %+v\nwant %+v", rows, want)
	}
	// A CPU figure unknown in a round is shown as unknown, not as a median of the others.
	if got := r.table(); !strings.Contains(got, "      1  950 (900-1,000)") || !strings.Contains(got, "65.0 us") || !regexp.MustCompile(`0\.50 ms +1\.00 ms +- +35\.0 us +200000\.0 us\n`).MatchString(got) {
		t.Errorf("table:\n%s", got)
	}
}

// TestRunOneBuild runs the command end to end on this checkout's baton,
// own/1 and own/4 for one short round, and checks its table and the
// section it writes into a Markdown file, and nothing else of the file.
func TestRunOneBuild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the servers' CPU comes from /proc")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build baton: %v\n%s", err, out)
	}
	beginMarker, endMarker := markers(bench.OwnKeys)
	head := "# Benchmarks\n\nHand-written text before.\n\n" + beginMarker
	tail := endMarker + "\n\n## After\n\nHand-written text after.\n"
	md := filepath.Join(dir, "docs", "BENCHMARKS.md")
	os.MkdirAll(filepath.Dir(md), 0o755)
	if err := os.WriteFile(md, []byte(head+"\nthe previous run's section\n"+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-build", bin, "-clients", "4,1", "-rounds", "1", "-duration", "300ms", "-warmup", "0s", "-port", "28950", "-out", md},
		&stdout, &stderr)
	if code != 0 {
		t.Fatalf("scaling exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, re := range []string{
		`build: .*baton\n`,
		`members: --max-client-conns 112\n`,
		`own/1 +round 1: +\d+ cycles/s  acquire p50 +[\d.]+ ms  p99 +[\d.]+ ms  servers' CPU/cycle [\d.]+ us \(leader [\d.]+ us\)  errors 0  setup excluded: servers \d+ ms \(leader \d+ ms\)\n`,
		`own/4 +round 1: +\d+ cycles/s`,
		`(?s)own/1 +round 1.*own/4 +round 1`, // ascending in the first round
		`\n +1  [\d,]+ +[\d.]+ ms +[\d.]+ ms +[\d.]+ us +[\d.]+ us +(?:[\d.]+ us|-)\n +4  [\d,]+ `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, head+"\n") || !strings.HasSuffix(doc, "\n"+tail) || strings.Contains(doc, "previous run") {
		t.Fatalf("the file outside the section changed, or the old section stayed:\n%s", doc)
	}
	for _, re := range []string{
		`## Scaling with connections`,
		`\*\*own/N with N clients:\*\*`,
		`!\[[^]]+\]\(scaling\.svg\)`,
		`\| 1 \| [\d,]+ \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ µs \| [\d.]+ µs \| (?:[\d.]+ µs|-) \|\n\| 4 \| `,
		"go run ./cmd/scaling -build " + regexp.QuoteMeta(bin) + ` -clients 4,1 -rounds 1 -duration 300ms -warmup 0s -port 28950 -out `,
		`load average \(1, 5, 15 minutes\) [\d.]+ [\d.]+ [\d.]+ before`,
		`\| CPU \| cores \|`,
	} {
		if !regexp.MustCompile(re).MatchString(doc) {
			t.Errorf("section lacks %s:\n%s", re, doc)
		}
	}
	for _, ext := range []string{".svg", ".png"} {
		if fi, err := os.Stat(filepath.Join(dir, "docs", "scaling"+ext)); err != nil || fi.Size() == 0 {
			t.Errorf("chart %s: %v", ext, err)
		}
	}
	// A second run would find its markers again: the section is rewritten, not appended.
	if _, _, err := readSection(md, bench.OwnKeys); err != nil {
		t.Error(err)
	}
}

func TestRunRefusesAFileWithoutMarkers(t *testing.T) {
	ownBegin, ownEnd := markers(bench.OwnKeys)
	hotBegin, _ := markers(bench.HotKey)
	for _, tc := range []struct {
		doc, workload, want string
	}{
		{"no markers\n", bench.OwnKeys, ownBegin},
		// own/N's section is not hot/N's.
		{ownBegin + "\n" + ownEnd + "\n", bench.HotKey, hotBegin},
	} {
		md := filepath.Join(t.TempDir(), "B.md")
		os.WriteFile(md, []byte(tc.doc), 0o644)
		var stdout, stderr bytes.Buffer
		if code := run([]string{"-build", "/nonexistent", "-workload", tc.workload, "-out", md}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q", tc.workload, code, stderr.String())
		}
		if b, _ := os.ReadFile(md); string(b) != tc.doc {
			t.Errorf("%s: the file became %q", tc.workload, b)
		}
	}
}
