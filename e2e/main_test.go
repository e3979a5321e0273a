package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var keepDirs = flag.Bool("e2e.keep", false, "keep the built binary's directory (logs stay in t.TempDir either way)")

// raceServerVar set to 1 builds the baton binary the tests run with -race,
// so that a data race in a server under the tests' load fails them (the
// server's log holds the report; the member exits 66). .ci/run sets it;
// it is an environment variable, not a flag, so that README's command
// over ./... can carry it to this package alone.
const raceServerVar = "BATON_TEST_RACE_SERVER"

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// TestMain removes the directory of the binary built by batonBinary.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if build.dir != "" && !*keepDirs {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// batonBinary builds ./cmd/baton once per test run (into a temporary
// directory) and returns its path. A test that needs it should have
// skipped under -short already.
func batonBinary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "baton-e2e-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		build.bin = filepath.Join(dir, "baton")
		args := []string{"build", "-o", build.bin}
		if os.Getenv(raceServerVar) == "1" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/batonlock/baton/cmd/baton")
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go %v: %w\n%s", args, err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("build baton: %v", build.err)
	}
	return build.bin
}

// skipShort skips t under -short: everything here uses real processes
// and ports.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: real processes and ports; skipped under -short")
	}
}
