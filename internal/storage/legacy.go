package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// migrate converts a store written by Baton 0.x, whose log was etcd's WAL
// in dir/wal, to the log in logDir, once: it reads the old log as that
// release did (newest snapshot with a valid record, then the entries after
// it), writes the snapshot record, the entries and the hard state into a
// new log in logDir.tmp, syncs it, renames it to logDir, and only then
// renames dir/wal to dir/wal.migrated (which may be deleted). A crash in
// between leaves either the old WAL alone, which the next Open converts
// again, or the new log, which it uses. Snapshot files are the same in
// both releases and stay where they are.
func migrate(dir, logDir string, log *slog.Logger) error {
	walDir := filepath.Join(dir, "wal")
	tmp := logDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if _, err := os.Stat(logDir); err == nil || !wal.Exist(walDir) {
		return nil
	}
	log.Info("converting the etcd WAL of an older release", "from", walDir, "to", logDir)
	sn, hs, ents, err := readLegacy(dir, walDir, log)
	if err != nil {
		return fmt.Errorf("convert %s: %w", walDir, err)
	}
	w, _, err := openWlog(tmp, log)
	if err != nil {
		return err
	}
	if sn != nil {
		err = w.saveSnapshot(sn.GetMetadata())
	}
	if err == nil && (hs != nil || len(ents) > 0) {
		err = w.save(hs, ents, true)
	}
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert %s: %w", walDir, err)
	}
	if err := os.Rename(tmp, logDir); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.Rename(walDir, walDir+".migrated"); err != nil {
		return err
	}
	log.Info("converted the etcd WAL; the old one may be deleted", "entries", len(ents), "old", walDir+".migrated")
	return syncDir(dir)
}

// readLegacy reads an etcd WAL the way Baton 0.x's Open did.
func readLegacy(dir, walDir string, log *slog.Logger) (*raftpb.Snapshot, *raftpb.HardState, []*raftpb.Entry, error) {
	zl := newZapLogger(log)
	snapper := snap.New(zl, filepath.Join(dir, "snap"))
	walSnaps, err := wal.ValidSnapshotEntries(zl, walDir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read wal snapshot records: %w", err)
	}
	sn, err := snapper.LoadNewestAvailable(walSnaps)
	switch {
	case errors.Is(err, snap.ErrNoSnapshot):
		sn = nil
	case err != nil:
		return nil, nil, nil, fmt.Errorf("load snapshot: %w", err)
	}
	start := &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))}
	if sn != nil {
		start = walSnapshot(sn.GetMetadata())
	}
	for repaired := false; ; repaired = true {
		w, err := wal.Open(zl, walDir, start)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open wal: %w", err)
		}
		_, hs, ents, err := w.ReadAll()
		w.Close()
		if err == nil {
			if raft.IsEmptyHardState(hs) {
				hs = nil
			}
			if raft.IsEmptySnap(sn) {
				sn = nil
			}
			return sn, hs, ents, nil
		}
		if repaired || !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, nil, fmt.Errorf("read wal: %w", err)
		}
		log.Warn("torn write at the end of the wal, repairing", "err", err)
		if !wal.Repair(zl, walDir) {
			return nil, nil, nil, fmt.Errorf("repair wal: %w", err)
		}
	}
}

func walSnapshot(md *raftpb.SnapshotMetadata) *walpb.Snapshot {
	return &walpb.Snapshot{
		Index:     new(md.GetIndex()),
		Term:      new(md.GetTerm()),
		ConfState: md.GetConfState(),
	}
}
