package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMutantsApply keeps the table in step with the code: every mutant's
// original text is in its file exactly once, and the mutated file parses.
// A change that moves such text fails here, in the ordinary test run, and
// not months later when the mutants are next run.
func TestMutantsApply(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, m := range mutants {
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		if _, err := m.mutate(src); err != nil {
			t.Error(err)
		}
	}
}

// TestMutantTable checks what the report relies on: unique names of the
// form area/rule, checks to run, and an edit that changes something.
func TestMutantTable(t *testing.T) {
	areas := []string{"fsm", "liveness", "raftnode", "server", "client", "fence", "transport"}
	seen := map[string]bool{}
	for _, m := range mutants {
		area, rule, ok := strings.Cut(m.name, "/")
		switch {
		case !ok || !slices.Contains(areas, area) || rule == "":
			t.Errorf("%q: want a name area/rule with area one of %v", m.name, areas)
		case seen[m.name]:
			t.Errorf("%q: two mutants of that name", m.name)
		case len(m.checks) == 0:
			t.Errorf("%q: no test command to run", m.name)
		case m.from == m.to || m.from == "":
			t.Errorf("%q: the edit changes nothing", m.name)
		}
		seen[m.name] = true
	}
}

// TestFailingTests reads go test's output as the report names the
// killers: the deepest failing tests, or those running at a timeout.
func TestFailingTests(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want []string
	}{
		{"--- FAIL: TestA (0.01s)\n    --- FAIL: TestA/sub (0.00s)\nFAIL\n", []string{"TestA/sub"}},
		{"=== RUN TestB\n--- FAIL: TestB (1.00s)\n    x_test.go:3: boom\nFAIL\nFAIL\tpkg\t1.0s\n", []string{"TestB"}},
		{"panic: test timed out after 2m0s\n\trunning tests:\n\t\tTestSlow (2m0s)\n\ngoroutine 1 [running]:\n", []string{"TestSlow (timed out)"}},
		{"ok  \tpkg\t0.1s\n", nil},
	} {
		if got := failingTests([]byte(tt.out)); !slices.Equal(got, tt.want) {
			t.Errorf("failingTests(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
	if !buildFailed([]byte("# github.com/batonlock/baton/internal/fsm\ninternal/fsm/lock.go:12:3: undefined: x\nFAIL\tgithub.com/batonlock/baton/internal/fsm [build failed]\n")) {
		t.Error("a build failure is not recognised")
	}
	if buildFailed([]byte("--- FAIL: TestA (0.01s)\n    a_test.go:9: want 1\nFAIL\n")) {
		t.Error("a test failure is taken for a build failure")
	}
}
