// Package testenv decides what a test does when the machine lacks what it
// needs (root, network namespaces, a program such as node, a file system
// that takes direct I/O): on a developer's machine it skips, saying what
// is missing; in CI it fails, so that a test cannot pass there having run
// nothing.
//
// CI is the environment variable BATON_TEST_STRICT=1, which .ci/run
// exports. It is the one switch for every test of the module.
package testenv

import "os"

// StrictVar is the environment variable that makes a missing need fail
// the test instead of skipping it.
const StrictVar = "BATON_TEST_STRICT"

// Strict reports whether a missing need fails the test (StrictVar is "1").
func Strict() bool { return os.Getenv(StrictVar) == "1" }

// TB is the part of testing.TB that Missing uses (non-test code does not
// import testing).
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Missing ends t because the machine lacks what the test needs, as
// format and args say: t fails under Strict, else it skips.
func Missing(t TB, format string, args ...any) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s=1 and the machine lacks what this test needs: "+format, append([]any{StrictVar}, args...)...)
		return
	}
	t.Skipf(format, args...)
}
