package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent is the collector's target for this package's tests unless the
// GOGC environment variable sets one. A scenario allocates about 10 MB
// while the live heap stays under 3 MB, so at Go's default of 100 (a
// 4 MB heap goal) the collector ran three times a scenario and took a
// fifth of the CPU time; at 400 it runs once every two scenarios, and
// the test process peaks near 40 MB of memory instead of 20 MB.
const gcPercent = 400

func TestMain(m *testing.M) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(m.Run())
}
