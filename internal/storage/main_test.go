package storage

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestMain runs every test of the package twice: with the log writing
// directly (where the file system takes it), then through the page cache.
func TestMain(m *testing.M) {
	flag.Parse()
	if code := m.Run(); code != 0 || flag.Lookup("test.bench").Value.String() != "" {
		// Benchmarks choose the way of writing themselves: once is enough.
		os.Exit(code)
	}
	fmt.Fprintln(os.Stderr, "storage: the tests again, with the log writing through the page cache (directIO = false)")
	directIO = false
	os.Exit(m.Run())
}

// directSupported reports whether the file system under dir takes direct
// I/O (tmpfs does not).
func directSupported(t *testing.T, dir string) bool {
	t.Helper()
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	f, err := openDirect(p)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// TestDirectWrites: where direct I/O is on and the file system takes it,
// the log writes directly; many saves smaller than a block, each
// rewriting the block before it, read back whole, from the live segment
// through the page cache and after a reopen; and a direct write the file
// system refuses makes the log go on through the page cache, losing
// nothing.
func TestDirectWrites(t *testing.T) {
	dir := t.TempDir()
	if !directIO || !directSupported(t, dir) {
		t.Skip("the log writes through the page cache here")
	}
	defer func(f func(*os.File, []byte, int64, bool) error) { writeDirect = f }(writeDirect)
	const refuseAt = 150
	refuse := false
	writeDirect = func(f *os.File, b []byte, off int64, dsync bool) error {
		if refuse {
			refuse = false
			return fmt.Errorf("write: %w", syscall.EINVAL)
		}
		return pwriteDirect(f, b, off, dsync)
	}
	smallSegments(t, 64<<10) // some cuts, each reopening directly
	s := mustOpen(t, dir)
	if s.wal.df == nil {
		t.Fatal("the log does not write directly")
	}
	var all []*raftpb.Entry
	for i := uint64(1); i <= 300; i++ {
		ents := entries(1, i, i)
		ents[0].Data = make([]byte, 50+int(i)%700)
		refuse = i == refuseAt
		mustSave(t, s, hardState(1, 1, i-1), ents)
		all = append(all, ents...)
		if i < refuseAt && s.wal.df == nil {
			t.Fatalf("save %d: the log stopped writing directly", i)
		}
		if i%37 == 0 { // the live segment reads back through the page cache
			p, end := lastSegment(t, dir)
			if end != s.wal.off {
				t.Fatalf("save %d: %s reads back to offset %d; the log is at %d", i, filepath.Base(p), end, s.wal.off)
			}
		}
	}
	if s.wal.df != nil || !s.wal.noDirect {
		t.Fatal("after a refused direct write the log still writes directly")
	}
	mustClose(t, s)
	s = mustOpen(t, dir)
	defer mustClose(t, s)
	checkState(t, s, nil, hardState(1, 1, 299), all)
}
