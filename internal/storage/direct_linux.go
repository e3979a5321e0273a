package storage

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// openDirect opens the segment at path a second time, for writes that
// bypass the page cache (O_DIRECT). The file system may refuse (tmpfs
// does); then the log writes through the page cache.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0)
}

// writeDirect is pwriteDirect; a variable so that tests can make it fail.
var writeDirect = pwriteDirect

// noRWFDSync is set once the kernel refuses pwritev2's RWF_DSYNC (before
// Linux 4.7): writes are then followed by an fdatasync.
var noRWFDSync atomic.Bool

// pwriteDirect writes b, block-aligned in memory, offset and length, at
// off of a file opened by openDirect. With dsync the data is durable when
// it returns: one write with RWF_DSYNC (a FUA write, or a write and a
// cache flush, as the device can), where write plus fdatasync takes two
// trips to the device.
func pwriteDirect(f *os.File, b []byte, off int64, dsync bool) error {
	if dsync && !noRWFDSync.Load() {
		n, err := unix.Pwritev2(int(f.Fd()), [][]byte{b}, off, unix.RWF_DSYNC)
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			noRWFDSync.Store(true)
			return pwriteDirect(f, b, off, dsync)
		}
		return fullWrite(n, len(b), err)
	}
	n, err := f.WriteAt(b, off)
	if err := fullWrite(n, len(b), err); err != nil {
		return err
	}
	if dsync {
		return fdatasync(f)
	}
	return nil
}

func fullWrite(n, want int, err error) error {
	if err == nil && n != want {
		err = errors.New("short write")
	}
	return err
}
