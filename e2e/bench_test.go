package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIBench runs `baton bench` against a real node, every workload
// briefly, and checks the JSON the side-by-side runner and scripts read:
// the fields, cycles done, no errors, and the profiles written.
// The header on stderr says how the workers share clients. It asserts
// nothing about speed (benchmarks are benchmarks).
func TestCLIBench(t *testing.T) {
	ep := singleNode(t)
	dir := t.TempDir()
	for _, wl := range []string{"own", "hot", "zipf", "batch", "hold"} {
		t.Run(wl, func(t *testing.T) {
			args := []string{"bench", "--endpoints", ep, "--workload", wl, "--workers", "4",
				"--duration", "500ms", "--warmup", "0s", "--json", "--prefix", "bench-" + wl}
			// The default is one client per worker; hot runs the shared
			// variant, every worker's session on one client.
			header := "4 workers, each with its own client"
			switch wl {
			case "hot":
				args = append(args, "--conns", "1")
				header = "4 workers sharing one client"
			case "batch":
				args = append(args, "--batch", "10", "--keys", "100")
			case "hold":
				args = append(args, "--hold", "10ms")
			case "own":
				args = append(args, "--cpuprofile", filepath.Join(dir, "cpu.prof"), "--memprofile", filepath.Join(dir, "mem.prof"))
			}
			cmd := exec.Command(batonBinary(t), args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("baton %v: %v\n%s", args, err, stderr.Bytes())
			}
			if !strings.Contains(stderr.String(), "baton bench: "+wl+", "+header) {
				t.Errorf("stderr lacks the header %q:\n%s", header, stderr.Bytes())
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
