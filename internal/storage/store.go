package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

const (
	// KeepSnapshots is how many snapshot files SaveSnapshot keeps, newest
	// first. More than one, so that a snapshot file that turns out to be
	// unreadable on restart still leaves an older one whose WAL record is
	// valid (etcd's default --max-snapshots is 5).
	KeepSnapshots = 5

	// KeepWALFiles is how many log segment files are kept at least, as
	// etcd's default --max-wals. Segments the log still needs are never
	// deleted, whatever their number.
	KeepWALFiles = 5
)

// ErrClosed is returned by Save and SaveSnapshot after Close.
var ErrClosed = errors.New("storage: store closed")

// Store is the durable Raft log and snapshot store of one Raft group. See
// the package doc for the order in which the Ready loop calls it.
type Store struct {
	log     *slog.Logger
	snapDir string

	// What Open recovered, until State hands it over.
	snap *raftpb.Snapshot
	hs   *raftpb.HardState
	ents []*raftpb.Entry

	// snapMu serializes SaveSnapshot calls. A snapshot file is written
	// under snapMu only: at a million locks that is about 90 MB and its
	// sync, and holding mu meanwhile kept every Save, so every commit,
	// waiting for it.
	snapMu sync.Mutex
	mu     sync.Mutex
	wal    *wlog // nil after Close
	// prevSnap is the index of the newest snapshot saved (or recovered):
	// the next SaveSnapshot releases the log up to it, not further.
	prevSnap uint64
}

// Open opens or creates the store in dir (dir/log and dir/snap). On an
// existing directory it reads the log, loads the newest snapshot that has
// a valid snapshot record in it (one at or below the commit index of the
// last hard state) and collects the entries after it. A torn last record
// (a crash in the middle of a write) is cut off, after keeping a copy of
// its segment as <name>.broken; any other damage is returned as an error.
// A directory written by an older Baton, with etcd's WAL in dir/wal, is
// converted first (see migrate). A nil log discards the Store's logging.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		log:     log.With("component", "storage"),
		snapDir: filepath.Join(dir, "snap"),
	}
	if err := os.MkdirAll(s.snapDir, 0o700); err != nil {
		return nil, fmt.Errorf("create snap dir: %w", err)
	}

	logDir := filepath.Join(dir, "log")
	if err := migrate(dir, logDir, s.log); err != nil {
		return nil, err
	}
	w, sc, err := openWlog(logDir, s.log)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logDir, err)
	}
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()

	// A snapshot record is trusted once a hard state that commits it was
	// written after it (the order the package doc asks for); the newest
	// such one whose file is readable is where the log starts.
	sn, err := loadNewestSnapshot(s.snapDir, s.log, func(term, index uint64) bool {
		for _, md := range sc.snaps {
			if md.GetIndex() == index && md.GetTerm() == term && index <= sc.hs.GetCommit() {
				return true
			}
		}
		return false
	})
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
		sn = nil
	case err != nil:
		return nil, fmt.Errorf("load snapshot %s: %w", s.snapDir, err)
	}
	ents, err := w.entriesAfter(sn.GetMetadata().GetIndex())
	if err != nil {
		return nil, fmt.Errorf("read log %s: %w", logDir, err)
	}
	s.wal, s.hs, s.ents = w, sc.hs, ents
	if raft.IsEmptyHardState(s.hs) {
		s.hs = nil
	}
	if sn != nil && !raft.IsEmptySnap(sn) {
		s.snap = sn
		s.prevSnap = sn.GetMetadata().GetIndex()
	}
	ok = true
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
	sn, err := loadNewestSnapshot(s.snapDir, s.log, func(uint64, uint64) bool { return true })
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	case err != nil:
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	return sn, nil
}

// Save appends ents and then hs (either may be empty) to the log. When
// sync is true (raft's Ready.MustSync) everything saved so far is on disk
// when Save returns, at the cost of one device flush; when false, Save
// writes them, or keeps them in memory for the next synced Save where the
// log writes directly (see doc.go). Writing entry i discards persisted
// entries with index >= i.
// Save neither retains nor modifies hs or ents.
func (s *Store) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return ErrClosed
	}
	if raft.IsEmptyHardState(hs) {
		hs = nil
	}
	if err := s.wal.save(hs, ents, sync); err != nil {
		return fmt.Errorf("save to log: %w", err)
	}
	return nil
}

// Syncs returns how many fdatasyncs the log has done since Open.
func (s *Store) Syncs() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return 0
	}
	return s.wal.syncs.Load()
}

// SaveSnapshot persists sn: the snapshot file first (written and synced),
// then the log's snapshot record (synced). It then releases the log
// segments wholly before the previous snapshot and deletes old snapshot
// files, keeping KeepWALFiles segments and KeepSnapshots snapshots at
// least; failures to delete are logged, not returned. An empty snapshot
// (index 0), or one no newer than the last saved, is a no-op.
// sn.Metadata.ConfState must be set.
//
// Save may run while the file is written: only the log record waits for
// it. SaveSnapshot calls are serialized.
func (s *Store) SaveSnapshot(sn *raftpb.Snapshot) error {
	if raft.IsEmptySnap(sn) {
		return nil
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	// prevSnap changes only here, under snapMu, so it holds still while
	// the file is written.
	if stale, err := s.stale(sn); stale || err != nil {
		return err
	}
	if err := writeSnapshotFile(s.snapDir, sn); err != nil {
		return fmt.Errorf("save snapshot file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return ErrClosed
	}
	md := sn.GetMetadata()
	if err := s.wal.saveSnapshot(md); err != nil {
		return fmt.Errorf("save snapshot record: %w", err)
	}
	// Release the log only up to the previous snapshot: until a hard
	// state that commits this one is durable, a crash makes recovery fall
	// back to the previous snapshot, which needs the entries after it
	// (found by internal/sim).
	if s.prevSnap > 0 {
		s.wal.release(s.prevSnap)
	}
	s.prevSnap = md.GetIndex()
	s.log.Info("saved snapshot", "index", md.GetIndex(), "term", md.GetTerm())
	s.purgeSnapshots()
	return nil
}

// writeSnapshotFile is writeSnapshot; tests hold it up.
var writeSnapshotFile = writeSnapshot

// stale reports whether sn is no newer than the last snapshot saved (a
// node's own snapshot, taken off its loop, can finish after the append
// worker saved a newer one from the leader, and is of no use then), or
// ErrClosed after Close.
func (s *Store) stale(sn *raftpb.Snapshot) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return false, ErrClosed
	}
	return sn.GetMetadata().GetIndex() <= s.prevSnap, nil
}

// Close syncs and closes the log. Later calls return nil.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wal == nil {
		return nil
	}
	err := s.wal.close()
	s.wal = nil
	if err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

// purgeSnapshots deletes all but the newest KeepSnapshots snapshot files.
// Names are <term>-<index> in fixed-width hex, so lexical order is age order.
func (s *Store) purgeSnapshots() {
	names, err := snapNames(s.snapDir)
	if err != nil {
		s.log.Warn("list snapshots", "err", err)
		return
	}
	for _, n := range names[:max(0, len(names)-KeepSnapshots)] {
		if err := os.Remove(filepath.Join(s.snapDir, n)); err != nil {
			s.log.Warn("remove old snapshot", "file", n, "err", err)
		}
	}
}
