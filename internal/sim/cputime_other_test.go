//go:build !unix

package sim

import "time"

// processCPU reports that this system does not say how much CPU time the
// process used (the soak then reports wall-time throughput only).
func processCPU() (time.Duration, bool) { return 0, false }
