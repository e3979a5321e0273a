package main

import (
	"testing"

	"github.com/batonlock/baton"
)

func TestDiskLine(t *testing.T) {
	for _, tt := range []struct {
		st   baton.Status
		want string
	}{
		{baton.Status{}, "disk: not guarded (--min-free-disk 0, or no statfs on this platform)"},
		{baton.Status{MinFreeDisk: 256 << 20}, "disk: free space unknown (cannot measure it), keeps 256.0 MiB (--min-free-disk): nothing is refused for it"},
		{baton.Status{DiskFree: 3 << 30, DiskFreeKnown: true, MinFreeDisk: 256 << 20}, "disk: 3.0 GiB free, keeps 256.0 MiB (--min-free-disk)"},
		{baton.Status{DiskFree: 100 << 20, DiskFreeKnown: true, MinFreeDisk: 256 << 20, LowDisk: true},
			"disk: LOW, 100.0 MiB free, under the 256.0 MiB it keeps (--min-free-disk): leading, it refuses new sessions and acquires"},
		{baton.Status{DiskFree: 512, DiskFreeKnown: true}, "disk: 512 B free (--min-free-disk 0: no guard)"},
	} {
		if got := diskLine(&tt.st); got != tt.want {
			t.Errorf("diskLine(%+v) =\n %q, want\n %q", tt.st, got, tt.want)
		}
	}
}
