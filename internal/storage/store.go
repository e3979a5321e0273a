package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

const (
	// KeepSnapshots is how many snapshot files SaveSnapshot keeps, newest
	// first. More than one, so that a snapshot file that turns out to be
	// unreadable on restart still leaves an older one whose WAL record is
	// valid (etcd's default --max-snapshots is 5).
	KeepSnapshots = 5

	// KeepWALFiles is how many WAL segment files are kept at least, as
	// etcd's default --max-wals. Segments that the open WAL still needs are
	// never deleted, whatever their number.
	KeepWALFiles = 5
)

// ErrClosed is returned by Save and SaveSnapshot after Close.
var ErrClosed = errors.New("storage: store closed")

// Store is the durable Raft log and snapshot store of one Raft group. See
// the package doc for the order in which the Ready loop calls it.
type Store struct {
	log     *slog.Logger
	zl      *zap.Logger
	walDir  string
	snapDir string
	snapper *snap.Snapshotter

	// What Open recovered, until State hands it over.
	snap *raftpb.Snapshot
	hs   *raftpb.HardState
	ents []*raftpb.Entry

	mu  sync.Mutex
	wal *wal.WAL // nil after Close
	// prevSnap is the index of the newest snapshot saved (or recovered):
	// the next SaveSnapshot releases the log up to it, not further.
	prevSnap uint64
	// prevHS mirrors the HardState etcd's WAL compares against in
	// raft.MustSync (the last non-empty one saved since Open, else empty),
	// so that Save knows whether WAL.Save has already synced.
	prevHS *raftpb.HardState
}

// Open opens or creates the store in dir (dir/wal and dir/snap). On an
// existing directory it loads the newest snapshot that has a valid WAL
// record, opens the WAL at it and reads the rest of the log. A torn last
// record (io.ErrUnexpectedEOF, e.g. after a crash in the middle of a write)
// is cut off with etcd's wal.Repair, which keeps a copy of the damaged
// segment as <name>.wal.broken; any other corruption is returned as an
// error. A nil log discards etcd's and the Store's logging.
func Open(dir string, log *slog.Logger) (*Store, error) {
	zl := newZapLogger(log)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		log:     log.With("component", "storage"),
		zl:      zl,
		walDir:  filepath.Join(dir, "wal"),
		snapDir: filepath.Join(dir, "snap"),
		prevHS:  &raftpb.HardState{},
	}
	if err := os.MkdirAll(s.snapDir, 0o700); err != nil {
		return nil, fmt.Errorf("create snap dir: %w", err)
	}
	s.snapper = snap.New(zl, s.snapDir)

	if !wal.Exist(s.walDir) {
		w, err := wal.Create(zl, s.walDir, nil)
		if err != nil {
			return nil, fmt.Errorf("create wal %s: %w", s.walDir, err)
		}
		s.wal = w
		return s, nil
	}

	walSnaps, err := wal.ValidSnapshotEntries(zl, s.walDir)
	if err != nil {
		return nil, fmt.Errorf("read wal snapshot records %s: %w", s.walDir, err)
	}
	sn, err := s.snapper.LoadNewestAvailable(walSnaps)
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
		sn = nil
	case err != nil:
		return nil, fmt.Errorf("load snapshot %s: %w", s.snapDir, err)
	}
	start := &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))}
	if sn != nil {
		start = walSnapshot(sn.GetMetadata())
	}

	for repaired := false; ; repaired = true {
		w, err := wal.Open(zl, s.walDir, start)
		if err != nil {
			return nil, fmt.Errorf("open wal %s: %w", s.walDir, err)
		}
		_, hs, ents, err := w.ReadAll()
		if err == nil {
			s.wal, s.hs, s.ents = w, hs, ents
			break
		}
		w.Close() // the read error is the one to report
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("read wal %s: %w", s.walDir, err)
		}
		s.log.Warn("torn write at the end of the wal, repairing", "err", err)
		if !wal.Repair(zl, s.walDir) {
			return nil, fmt.Errorf("repair wal %s: %w", s.walDir, err)
		}
	}
	if raft.IsEmptyHardState(s.hs) {
		s.hs = nil
	}
	if sn != nil && !raft.IsEmptySnap(sn) {
		s.snap = sn
		s.prevSnap = sn.GetMetadata().GetIndex()
	}
	s.log.Info("opened", "index", s.snap.GetMetadata().GetIndex(), "term", s.hs.GetTerm(),
		"commit", s.hs.GetCommit(), "entries", len(s.ents))
	return s, nil
}

// State hands over what Open recovered: the snapshot (nil if none), the
// hard state (nil if none) and the entries after the snapshot, in index
// order, with overwritten suffixes already discarded. Entries past
// hs.Commit may be uncommitted. The caller owns the returned values; later
// Saves do not change them. The Store forgets the snapshot and entries it
// hands over (at scale they are tens of MB the process would otherwise
// carry for its lifetime), so a second call returns only the hard state.
func (s *Store) State() (snap *raftpb.Snapshot, hs *raftpb.HardState, ents []*raftpb.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, hs, ents = s.snap, s.hs, s.ents
	s.snap, s.ents = nil, nil
	return snap, hs, ents
}

// Snapshot loads the newest snapshot saved (by SaveSnapshot, or found by
// Open), data included, or returns raft.ErrSnapshotTemporarilyUnavailable
// if there is none. The Ready loop keeps only snapshot metadata in memory
// and reads the data from disk when a follower needs it.
func (s *Store) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.snapper.Load()
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	case err != nil:
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	return sn, nil
}

// Save appends ents and then hs (either may be empty) to the WAL. When sync
// is true (raft's Ready.MustSync) everything saved so far is on disk when
// Save returns, at the cost of one fdatasync. Writing entry i discards
// persisted entries with index >= i. Save neither retains nor modifies hs
// or ents.
//
// etcd's WAL.Save ignores the caller's wish and decides by itself: it syncs
// when raft.MustSync(hs, previous hs, len(ents)) is true (new entries, or a
// changed term or vote) and when a 64 MB segment fills up. So sync=false
// does not prevent an fdatasync, and sync=true on a save that changes only
// the commit index gets an explicit WAL.Sync here.
func (s *Store) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return ErrClosed
	}
	if raft.IsEmptyHardState(hs) {
		hs = nil
	} else {
		// etcd's WAL keeps the pointer it is given; give it our own copy.
		hs = &raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}
	}
	walSyncs := (hs != nil || len(ents) > 0) && raft.MustSync(hs, s.prevHS, len(ents))
	if err := s.wal.Save(hs, ents); err != nil {
		return fmt.Errorf("save to wal: %w", err)
	}
	if hs != nil {
		s.prevHS = hs
	}
	if sync && !walSyncs {
		if err := s.wal.Sync(); err != nil {
			return fmt.Errorf("sync wal: %w", err)
		}
	}
	return nil
}

// SaveSnapshot persists sn: the snapshot file first (written and synced),
// then the WAL snapshot record (synced). It then releases the WAL segments
// wholly before sn and deletes old segment and snapshot files, keeping
// KeepWALFiles and KeepSnapshots of them; failures to delete are logged,
// not returned, and retried on the next snapshot. An empty snapshot
// (index 0) is a no-op. sn.Metadata.ConfState must be set.
func (s *Store) SaveSnapshot(sn *raftpb.Snapshot) error {
	if raft.IsEmptySnap(sn) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return ErrClosed
	}
	md := sn.GetMetadata()
	if err := s.snapper.SaveSnap(sn); err != nil {
		return fmt.Errorf("save snapshot file: %w", err)
	}
	if err := s.wal.SaveSnapshot(walSnapshot(md)); err != nil {
		return fmt.Errorf("save wal snapshot record: %w", err)
	}
	// Release the log only up to the previous snapshot: until a hard
	// state that commits this one is durable, a crash makes recovery fall
	// back to the previous snapshot (wal.ValidSnapshotEntries), which
	// needs the entries after it (found by internal/sim).
	if s.prevSnap > 0 {
		if err := s.wal.ReleaseLockTo(s.prevSnap); err != nil {
			return fmt.Errorf("release wal segments: %w", err)
		}
	}
	s.prevSnap = md.GetIndex()
	s.log.Info("saved snapshot", "index", md.GetIndex(), "term", md.GetTerm())
	s.purgeSnapshots()
	s.purgeWAL()
	return nil
}

// Close syncs and closes the WAL. Later calls return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return nil
	}
	err := s.wal.Close()
	s.wal = nil
	if err != nil {
		return fmt.Errorf("close wal: %w", err)
	}
	return nil
}

func walSnapshot(md *raftpb.SnapshotMetadata) *walpb.Snapshot {
	return &walpb.Snapshot{
		Index:     new(md.GetIndex()),
		Term:      new(md.GetTerm()),
		ConfState: md.GetConfState(),
	}
}

// purgeSnapshots deletes all but the newest KeepSnapshots snapshot files.
// Names are <term>-<index> in fixed-width hex, so lexical order is age order.
func (s *Store) purgeSnapshots() {
	names, err := fileutil.ReadDir(s.snapDir)
	if err != nil {
		s.log.Warn("list snapshots", "err", err)
		return
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".snap") })
	for _, n := range names[:max(0, len(names)-KeepSnapshots)] {
		if err := os.Remove(filepath.Join(s.snapDir, n)); err != nil {
			s.log.Warn("remove old snapshot", "file", n, "err", err)
		}
	}
}

// purgeWAL deletes the oldest WAL segments beyond KeepWALFiles, as etcd's
// fileutil.PurgeFile does: a segment is deleted only while we can lock it,
// i.e. after ReleaseLockTo has let go of it, and the scan stops at the
// first one the open WAL still holds.
func (s *Store) purgeWAL() {
	names, err := fileutil.ReadDir(s.walDir)
	if err != nil {
		s.log.Warn("list wal segments", "err", err)
		return
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, ".wal") })
	for _, n := range names[:max(0, len(names)-KeepWALFiles)] {
		p := filepath.Join(s.walDir, n)
		l, err := fileutil.TryLockFile(p, os.O_WRONLY, fileutil.PrivateFileMode)
		if err != nil {
			return // still in use
		}
		err = os.Remove(p)
		l.Close()
		if err != nil {
			s.log.Warn("remove old wal segment", "file", n, "err", err)
			return
		}
		s.log.Debug("removed old wal segment", "file", n)
	}
}
