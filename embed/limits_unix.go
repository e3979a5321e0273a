//go:build unix

package embed

import "syscall"

// openFileLimit is the process's limit on open files (RLIMIT_NOFILE's soft
// limit, which Go's runtime raised to the hard limit at start).
func openFileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
