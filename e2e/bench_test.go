package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCLIBench runs `baton bench` against a real node, every workload
// briefly, and checks the JSON the side-by-side runner and scripts read:
// the fields, cycles done, no errors, and the profiles written.
// It asserts nothing about speed (benchmarks are benchmarks).
func TestCLIBench(t *testing.T) {
	ep := singleNode(t)
	dir := t.TempDir()
	for _, wl := range []string{"own", "hot", "zipf", "batch", "hold"} {
		t.Run(wl, func(t *testing.T) {
			args := []string{"bench", "--endpoints", ep, "--workload", wl, "--workers", "4",
				"--duration", "500ms", "--warmup", "0s", "--json", "--prefix", "bench-" + wl}
			switch wl {
			case "batch":
				args = append(args, "--batch", "10", "--keys", "100")
			case "hold":
				args = append(args, "--hold", "10ms")
			case "own":
				args = append(args, "--cpuprofile", filepath.Join(dir, "cpu.prof"), "--memprofile", filepath.Join(dir, "mem.prof"))
			}
			out, err := exec.Command(batonBinary(t), args...).Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("baton %v: %v\n%s", args, err, stderr)
			}
			var r map[string]any
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, out)
			}
			for _, k := range []string{"cycles_per_sec", "acquire_p50_ms", "acquire_p99_ms", "release_p50_ms", "release_p99_ms", "per_worker_min", "per_worker_max", "errors"} {
				if _, ok := r[k]; !ok {
					t.Errorf("no %q in %s", k, out)
				}
			}
			if n, _ := r["cycles"].(float64); n < 1 {
				t.Errorf("no cycles done: %s", out)
			}
			if e, _ := r["errors"].(float64); e != 0 {
				t.Errorf("%v errors: %s", e, out)
			}
		})
	}
	for _, f := range []string{"cpu.prof", "mem.prof"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
}
