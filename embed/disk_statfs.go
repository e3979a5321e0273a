//go:build linux || darwin || freebsd || dragonfly

package embed

import "golang.org/x/sys/unix"

// statDisk measures dir's file system with statfs(2): the blocks free
// for unprivileged processes (the root reserve, which the member cannot
// count on, left out) and all its blocks.
func statDisk(dir string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return uint64(max(st.Bavail, 0)) * bs, uint64(st.Blocks) * bs, nil
}
