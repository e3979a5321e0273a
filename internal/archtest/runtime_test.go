package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runtimeKnobs are the calls that change how the Go runtime runs the
// process. The product and its benchmarks run the runtime as shipped: an
// operator sets these through the runtime's own environment variables
// (GOGC, GOMEMLIMIT, GOMAXPROCS; docs/OPERATIONS.md), and only the
// command's main package, cmd/baton, may apply one from a documented flag,
// once at start. Library code that retuned the collector after every
// collection made every embedding program, and every benchmark, run a
// tuned runtime without saying so.
var runtimeKnobs = map[string][]string{
	"runtime/debug": {"SetGCPercent", "SetMemoryLimit", "SetMaxThreads", "SetMaxStack"},
	"runtime":       {"GOMAXPROCS"}, // GOMAXPROCS(0) only reads it
}

// reexecs are the calls that replace the process with a program: nothing
// in the repository, tests included, re-executes itself to start with a
// different environment (a member once did, to set an undocumented
// GODEBUG behaviour).
var reexecs = map[string][]string{
	"syscall":               {"Exec"},
	"golang.org/x/sys/unix": {"Exec"},
}

// startersAllowedIn are the library packages that may start processes,
// with the reason: test helpers that run a program a test needs, which
// only tests and examples import (TestDependencyRules), and the benchmark
// harness's cluster runner, in the benchmarks module, which ships nothing.
var startersAllowedIn = map[string]string{
	"internal/testpg":             "starts a throwaway PostgreSQL (initdb, postgres) for tests and examples/inventory",
	"benchmarks/internal/cluster": "starts the Baton clusters that benchmarks/cmd/abtest and scaling measure, and their `baton bench`",
}

// knobsAllowedIn is the one directory whose non-test files may call a
// runtimeKnob: the flags of `baton server`.
const knobsAllowedIn = "cmd/baton"

// TestRuntimeAsShipped walks every Go file of the repository, the
// benchmarks module included, for runtimeKnobs and reexecs, and checks
// that no library package (a package other than main, or a test helper of
// startersAllowedIn) starts processes:
// the product never re-executes itself; only the CLI runs a command the
// user gave it (`baton lock -- cmd`).
func TestRuntimeAsShipped(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files++
		return checkRuntimeCalls(t, path, filepath.ToSlash(rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("found only %d Go files under %s", files, root)
	}
}

// checkRuntimeCalls reports the rule breaks in one file; rel is its path
// from the repository's root.
func checkRuntimeCalls(t *testing.T, path, rel string) error {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	isTest := strings.HasSuffix(rel, "_test.go")
	_, starter := startersAllowedIn[filepath.ToSlash(filepath.Dir(rel))]
	// imported maps the name a package is known by in the file to its path.
	imported := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return err
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imported[name] = p
		if p == "os/exec" && !isTest && f.Name.Name != "main" && !starter {
			t.Errorf("%s: library package %s imports os/exec: the product starts no processes and never re-executes itself", rel, f.Name.Name)
		}
	}
	knobsAllowed := !isTest && filepath.ToSlash(filepath.Dir(rel)) == knobsAllowedIn
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		pkg, fn := imported[x.Name], sel.Sel.Name
		switch {
		case listed(reexecs, pkg, fn):
			t.Errorf("%s: calls %s.%s: nothing re-executes itself", rel, pkg, fn)
		case listed(runtimeKnobs, pkg, fn) && !knobsAllowed && !readsOnly(call, fn):
			t.Errorf("%s: calls %s.%s: the runtime runs as shipped; settings come from the operator (environment, or a flag in %s)", rel, pkg, fn, knobsAllowedIn)
		}
		return true
	})
	return nil
}

func listed(calls map[string][]string, pkg, fn string) bool {
	for _, c := range calls[pkg] {
		if c == fn {
			return true
		}
	}
	return false
}

// readsOnly reports whether call is runtime.GOMAXPROCS(0), which changes
// nothing.
func readsOnly(call *ast.CallExpr, fn string) bool {
	if fn != "GOMAXPROCS" || len(call.Args) != 1 {
		return false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	return ok && lit.Kind == token.INT && lit.Value == "0"
}
