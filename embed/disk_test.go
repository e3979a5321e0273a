package embed

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fixedDisk is a DiskSpace with this many bytes free.
type fixedDisk uint64

func (d fixedDisk) Free() (uint64, bool) { return uint64(d), true }

func TestDefaultMinFreeDisk(t *testing.T) {
	for _, tt := range []struct{ size, want uint64 }{
		{0, 0},
		{64 << 20, 64 << 20 / 50},            // a container's /dev/shm: 1.3 MB
		{1 << 30, 1 << 30 / 50},              // 20 MiB
		{50 * 256 << 20, MinFreeDiskCeiling}, // 12.5 GiB: where the two meet
		{1 << 40, MinFreeDiskCeiling},
	} {
		if got := DefaultMinFreeDisk(tt.size); got != tt.want {
			t.Errorf("DefaultMinFreeDisk(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
}

// TestDiskGuardConfig: the threshold and the source of the free space
// for each MinFreeDisk and DiskSpace.
func TestDiskGuardConfig(t *testing.T) {
	const size = 1 << 30
	statOK := func(string) (uint64, uint64, error) { return 5 << 20, size, nil }
	statNone := func(string) (uint64, uint64, error) { return 0, 0, errors.ErrUnsupported }
	lg := slog.New(slog.DiscardHandler)
	injected := fixedDisk(7)
	tests := []struct {
		name     string
		min      int64
		disk     DiskSpace
		stat     statFunc
		wantMin  uint64
		wantFree uint64 // 0: unknown
	}{
		{"off", 0, nil, statOK, 0, 0},
		{"auto", MinFreeDiskAuto, nil, statOK, size / MinFreeDiskShare, 5 << 20},
		{"given", 100 << 20, nil, statOK, 100 << 20, 5 << 20},
		{"no statfs", MinFreeDiskAuto, nil, statNone, 0, 0},
		{"injected", 100, injected, statOK, 100, 7},
		{"injected, no statfs", MinFreeDiskAuto, injected, statNone, MinFreeDiskCeiling, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MinFreeDisk, cfg.DiskSpace = tt.min, tt.disk
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			g, p := cfg.diskGuard(t.TempDir(), tt.stat, lg)
			if p != nil {
				defer p.Stop()
			}
			var free uint64
			if g.Free != nil {
				free, _ = g.Free()
			}
			if g.MinFree != tt.wantMin || free != tt.wantFree {
				t.Errorf("min %d, free %d; want %d, %d", g.MinFree, free, tt.wantMin, tt.wantFree)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.MinFreeDisk = -2
	if err := cfg.Validate(); err == nil {
		t.Error("MinFreeDisk -2 is valid")
	}
}

// syncBuffer is a bytes.Buffer for a logger on another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDiskPoller: the poller measures at once and then every interval
// (on synctest's clock), Free reports the last measure (unknown while
// statfs fails), and the logs say once when the disk fell under the
// threshold and when it is back.
func TestDiskPoller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu   sync.Mutex
			free uint64 = 500
			fail error
		)
		stat := func(string) (uint64, uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			return free, 1000, fail
		}
		set := func(n uint64, err error) {
			mu.Lock()
			defer mu.Unlock()
			free, fail = n, err
		}
		var logs syncBuffer
		p := startDiskPoller("dir", DiskPollInterval, 100, stat, slog.New(slog.NewTextHandler(&logs, nil)))
		defer p.Stop()
		check := func(when string, want uint64, wantOK bool) {
			t.Helper()
			if got, ok := p.Free(); got != want || ok != wantOK {
				t.Fatalf("%s: Free() = %d, %v; want %d, %v", when, got, ok, want, wantOK)
			}
		}
		tick := func() {
			time.Sleep(DiskPollInterval)
			synctest.Wait()
		}
		check("at start", 500, true)
		time.Sleep(DiskPollInterval / 2) // between ticks from now on
		set(50, nil)
		check("before the next tick", 500, true)
		tick()
		check("low", 50, true)
		tick()
		tick()
		set(0, errors.New("statfs: input/output error"))
		tick()
		check("failing", 0, false)
		set(200, nil)
		tick()
		check("back", 200, true)
		out := logs.String()
		for _, want := range []string{"level=ERROR msg=\"data dir nearly full", "level=WARN msg=\"cannot measure", "measuring the data dir's free space again", "data dir has space again"} {
			if n := strings.Count(out, want); n != 1 {
				t.Errorf("logged %q %d times, want once:\n%s", want, n, out)
			}
		}
	})
}
