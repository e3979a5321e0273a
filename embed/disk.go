package embed

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/internal/server"
)

// The free space a member keeps in its data dir's file system
// (Config.MinFreeDisk; docs/CLUSTER.md "Limits").
const (
	// MinFreeDiskCeiling caps the default of MinFreeDisk. It holds what a
	// member may still write once it refuses new work: the log segment it
	// prepares ahead (up to 64 MiB), a snapshot (about 100 MB at the
	// scale of DefaultMaxSessions: 100,000 sessions holding 1,000,000
	// locks) written before the oldest is deleted, and the releases,
	// expiries and closes it keeps logging meanwhile. A larger file
	// system needs no more: what a member writes grows with its state, not
	// with the disk.
	MinFreeDiskCeiling = 256 << 20
	// MinFreeDiskShare is the other bound of the default: a fiftieth
	// (2%) of the file system, so that a small one (a test's tmpfs, a
	// container's 64 MiB /dev/shm) is not refused every new session at
	// once, while its state, and so its snapshots and log, are small.
	MinFreeDiskShare = 50
	// MinFreeDiskAuto, DefaultConfig's MinFreeDisk, is
	// DefaultMinFreeDisk of the data dir's file system, as large as it is
	// when the member starts.
	MinFreeDiskAuto = -1
	// DiskPollInterval is how often a member measures its data dir's
	// free space (one statfs call); requests read the last measure. A
	// second is far shorter than the time a busy member takes to write
	// MinFreeDiskCeiling.
	DiskPollInterval = time.Second
)

// DefaultMinFreeDisk is the free space a member keeps, by default, on a
// file system of size bytes: min(MinFreeDiskCeiling, size /
// MinFreeDiskShare).
func DefaultMinFreeDisk(size uint64) uint64 {
	return min(MinFreeDiskCeiling, size/MinFreeDiskShare)
}

// DiskSpace reports the free space of a member's data dir.
type DiskSpace interface {
	// Free returns the bytes free for the member in its data dir's file
	// system, and false when it does not know them (the member then
	// refuses nothing for space). The member calls it for every open and
	// acquire while it leads and for Status and /metrics, from many
	// goroutines at once: it must be cheap.
	Free() (bytes uint64, ok bool)
}

// statFunc measures the file system of dir: the bytes free for an
// unprivileged process, and its size. errors.ErrUnsupported where there
// is no way to.
type statFunc func(dir string) (free, size uint64, err error)

// diskGuard sets up the member's disk guard for its group directory dir:
// the threshold (MinFreeDisk, or its default for dir's file system) and
// where the free space comes from (Config.DiskSpace, or a poller it
// starts; Member.Close stops it). It returns the poller it started, if
// any.
func (c Config) diskGuard(dir string, stat statFunc, lg *slog.Logger) (server.DiskGuard, *diskPoller) {
	if c.MinFreeDisk == 0 {
		return server.DiskGuard{}, nil
	}
	_, size, err := stat(dir)
	minFree := uint64(c.MinFreeDisk)
	if c.MinFreeDisk == MinFreeDiskAuto {
		minFree = MinFreeDiskCeiling
		if err == nil {
			minFree = DefaultMinFreeDisk(size)
		}
	}
	if c.DiskSpace != nil {
		return server.DiskGuard{MinFree: minFree, Free: c.DiskSpace.Free}, nil
	}
	if errors.Is(err, errors.ErrUnsupported) {
		lg.Info("free disk space is not measured on this platform: the member refuses nothing for it (--min-free-disk)")
		return server.DiskGuard{}, nil
	}
	p := startDiskPoller(dir, DiskPollInterval, minFree, stat, lg)
	return server.DiskGuard{MinFree: minFree, Free: p.Free}, p
}

// diskPoller measures the free space of a directory every interval into
// an atomic, which Free reads: requests never wait for the disk. It logs
// when the space falls under its threshold (an operator must act) and
// when it is back.
type diskPoller struct {
	dir     string
	minFree uint64
	stat    statFunc
	log     *slog.Logger

	free  atomic.Uint64
	known atomic.Bool

	// The state last logged; touched only by record.
	low, failing bool

	stop chan struct{}
	done chan struct{}
}

// startDiskPoller measures dir now and then every interval; Stop ends
// it.
func startDiskPoller(dir string, interval time.Duration, minFree uint64, stat statFunc, lg *slog.Logger) *diskPoller {
	p := &diskPoller{dir: dir, minFree: minFree, stat: stat, log: lg, stop: make(chan struct{}), done: make(chan struct{})}
	p.record(stat(dir))
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.record(p.stat(p.dir))
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

// Free implements DiskSpace with the last measure.
func (p *diskPoller) Free() (uint64, bool) {
	if !p.known.Load() {
		return 0, false
	}
	return p.free.Load(), true
}

// Stop ends the polling and waits for it.
func (p *diskPoller) Stop() {
	close(p.stop)
	<-p.done
}

// record stores one measure and logs what changed; one goroutine at a
// time calls it (startDiskPoller, then the poller's).
func (p *diskPoller) record(free, _ uint64, err error) {
	if err != nil {
		p.known.Store(false)
		if !p.failing {
			p.failing = true
			p.log.Warn("cannot measure the data dir's free space: nothing is refused for it until it can (--min-free-disk)", "data_dir", p.dir, "err", err)
		}
		return
	}
	p.free.Store(free)
	p.known.Store(true)
	if p.failing {
		p.failing = false
		p.log.Info("measuring the data dir's free space again", "data_dir", p.dir)
	}
	switch low := p.minFree > 0 && free < p.minFree; {
	case low && !p.low:
		p.log.Error("data dir nearly full: while it leads, the member refuses new sessions and acquires until min_free_bytes are free (--min-free-disk); free space, or move the member to a larger disk",
			"data_dir", p.dir, "free_bytes", free, "min_free_bytes", p.minFree)
		p.low = true
	case !low && p.low:
		p.log.Info("data dir has space again: taking new sessions and acquires", "data_dir", p.dir, "free_bytes", free, "min_free_bytes", p.minFree)
		p.low = false
	}
}
