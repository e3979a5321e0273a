//go:build unix

package sim

import (
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, the process has used on
// all its cores (scenarios, garbage collector, runtime); ok is false if
// the system cannot say.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
