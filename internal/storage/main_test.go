package storage

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/testenv"
)

// TestMain runs every test of the package twice: with the log writing
// directly (where the file system takes it), then through the page cache.
// Where the temporary directory refuses direct I/O (tmpfs on older
// kernels), the tests make their directories under the package's directory
// instead, so that the first run writes directly.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTwice(m))
}

func runTwice(m *testing.M) int {
	if dir, err := directTempDir(); err != nil {
		// TestDirectWrites says so: it skips, or fails under testenv.Strict.
		fmt.Fprintf(os.Stderr, "storage: %v; the log writes through the page cache in both runs\n", err)
	} else if dir != "" {
		defer os.RemoveAll(dir)
		os.Setenv("TMPDIR", dir)
	}
	if code := m.Run(); code != 0 || flag.Lookup("test.bench").Value.String() != "" {
		// Benchmarks choose the way of writing themselves: once is enough.
		return code
	}
	fmt.Fprintln(os.Stderr, "storage: the tests again, with the log writing through the page cache (directIO = false)")
	directIO = false
	return m.Run()
}

// directTempDir returns "" where os.TempDir() takes direct I/O, else a
// new directory under the working directory (the package's, on the
// checkout's file system) that does, for the caller to remove.
func directTempDir() (string, error) {
	errTemp := probeDirect(os.TempDir())
	if errTemp == nil {
		return "", nil
	}
	dir, err := os.MkdirTemp(".", ".direct-io-test-")
	if err != nil {
		return "", fmt.Errorf("%s refuses direct I/O (%v) and no directory can be made here: %v", os.TempDir(), errTemp, err)
	}
	if err := probeDirect(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("neither %s (%v) nor the package's directory (%v) takes direct I/O", os.TempDir(), errTemp, err)
	}
	return filepath.Abs(dir)
}

// probeDirect opens a new file in dir for direct I/O, and removes it.
func probeDirect(dir string) error {
	f, err := os.CreateTemp(dir, "probe-")
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(f.Name())
	d, err := openDirect(f.Name())
	if err != nil {
		return err
	}
	return d.Close()
}

// TestDirectWrites: where direct I/O is on (the first run), the log
// writes directly (a file system that refuses it skips the test, or fails
// it under testenv.Strict); many saves smaller than a block, each
// rewriting the block before it, read back whole, from the live segment
// through the page cache and after a reopen; and a direct write the file
// system refuses makes the log go on through the page cache, losing
// nothing.
func TestDirectWrites(t *testing.T) {
	if !directIO {
		t.Skip("the second run: the log writes through the page cache")
	}
	dir := t.TempDir()
	if err := probeDirect(dir); err != nil {
		testenv.Missing(t, "the file system under %s refuses direct I/O: %v", dir, err)
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
