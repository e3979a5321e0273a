//go:build !(linux || darwin || freebsd || dragonfly)

package embed

import "errors"

// statDisk is not available here: the disk guard is off (Config.MinFreeDisk).
func statDisk(string) (free, size uint64, err error) { return 0, 0, errors.ErrUnsupported }
