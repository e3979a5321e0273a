package main

import (
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/benchmarks/internal/cluster"
	"github.com/batonlock/baton/internal/bench"
)

func TestParseWorkloads(t *testing.T) {
	ws, err := parseWorkloads("own/1, hot/16,zipf/64")
	if err != nil || len(ws) != 3 || ws[1] != (workload{"hot", 16}) || ws[2].String() != "zipf/64" {
		t.Fatalf("parseWorkloads = %v, %v", ws, err)
	}
	for _, bad := range []string{"", "own", "own/0", "own/x", "mine/4", "own/4,"} {
		if _, err := parseWorkloads(bad); err == nil {
			t.Errorf("parseWorkloads(%q) took it", bad)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-a", "x", "-env-b", "GODEBUG=schedtrace=0 GOGC=200", "-rounds", "3"}, io.Discard)
	if err != nil || o.b != "HEAD" || len(o.envB) != 2 || o.rounds != 3 || o.workloads[0] != (workload{"own", 64}) {
		t.Fatalf("parseFlags = %+v, %v", o, err)
	}
	// One client per worker unless -shared, named to baton bench either way.
	if o.shared || o.conns(workload{"own", 64}) != 64 || !strings.Contains(o.variant(), "one per worker") {
		t.Errorf("default clients: shared %v, --conns %d, %q", o.shared, o.conns(workload{"own", 64}), o.variant())
	}
	if o, err := parseFlags([]string{"-a", "x", "-shared"}, io.Discard); err != nil || o.conns(workload{"hot", 16}) != 1 || !strings.Contains(o.variant(), "shared connection") {
		t.Errorf("-shared: %+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{},                               // no -a
		{"-a", "x", "-rounds", "0"},      // no pairs
		{"-a", "x", "-duration", "0s"},   // nothing measured
		{"-a", "x", "-env-a", "GOGC"},    // not KEY=VALUE
		{"-a", "x", "-env-a", "=1"},      // no key
		{"-a", "x", "-port", "80"},       // privileged
		{"-a", "x", "-workloads", "x/1"}, // unknown kind
		{"-a", "x", "extra"},             // stray argument
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) took it", bad)
		}
	}
}

func TestSummarize(t *testing.T) {
	m := func(cps, p50 float64, cpuUS int) cluster.Measurement {
		return cluster.Measurement{Report: bench.Report{CyclesPerSec: cps, AcquireP50: p50}, CPUPerCycle: time.Duration(cpuUS) * time.Microsecond}
	}
	pairs := []pair{
		{m(100, 2.0, 80), m(120, 1.5, 60)},
		{m(100, 1.0, 80), m(90, 1.2, 70)},
		{m(110, 2.0, 90), m(132, 1.8, 100)},
	}
	got := summarize(workload{"own", 64}, "one per worker", pairs)
	for _, want := range []string{
		"own/64, 3 pairs, clients one per worker:",
		"A: cycles/s median 100 (100-110), acquire p50 median 2.00 ms, servers' CPU/cycle median 80.0 us",
		"B: cycles/s median 120 (90-132), acquire p50 median 1.50 ms, servers' CPU/cycle median 70.0 us",
		"B/A cycles/s: median 1.200 (0.900-1.200); B ahead in 2 of 3 pairs, lower acquire p50 in 2, less CPU per cycle in 2 of 3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	// Without /proc the CPU figures are left out, not shown as zero.
	pairs[0][0].CPUPerCycle = 0
	if got := summarize(workload{"own", 1}, "one per worker", pairs); strings.Contains(got, "A: cycles/s median 100 (100-110), acquire p50 median 2.00 ms, servers'") ||
		!strings.Contains(got, "less CPU per cycle in 1 of 2") {
		t.Errorf("summary with an unknown CPU figure:\n%s", got)
	}
}

// TestRunTwoBuilds runs the command end to end: this checkout's baton as
// both A and B (B with an extra variable), one short pair of own/1.
func TestRunTwoBuilds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the servers' CPU comes from /proc")
	}
	bin := filepath.Join(t.TempDir(), "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build baton: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-a", bin, "-b", bin, "-env-b", "GOGC=200", "-workloads", "own/1", "-rounds", "1",
		"-duration", "500ms", "-warmup", "0s", "-port", "28900"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("abtest exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, re := range []string{
		`B: .*baton \[GOGC=200\]`,
		`clients: one per worker, each its own connection and session \(--conns equal to the workers\)`,
		`own/1 +round 1 A: +\d+ cycles/s  acquire p50 +[\d.]+ ms  p99 +[\d.]+ ms  servers' CPU/cycle [\d.]+ us \(leader [\d.]+ us\)  errors 0`,
		`own/1 +round 1 B: +\d+ cycles/s`,
		`B/A cycles/s: median [\d.]+ \([\d.]+-[\d.]+\); B ahead in [01] of 1 pairs, lower acquire p50 in [01], less CPU per cycle in [01] of 1`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
}
