package storage

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestSaveSync pins when Save fdatasyncs: exactly when sync is true (the
// node decides, by raft's MustSync).
func TestSaveSync(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	tests := []struct {
		name      string
		hs        *raftpb.HardState
		ents      []*raftpb.Entry
		sync      bool
		wantSyncs uint64
	}{
		{"entries and new term, sync", hardState(1, 1, 0), entries(1, 1, 2), true, 1},
		{"commit only, sync", hardState(1, 1, 2), nil, true, 1},
		{"commit only, no sync", hardState(1, 1, 2), nil, false, 0},
		{"vote change, sync", hardState(2, 2, 2), nil, true, 1},
		{"nothing, sync", nil, nil, true, 1}, // flushes earlier unsynced saves
		{"nothing, no sync", nil, nil, false, 0},
		{"entries, no sync", nil, entries(2, 3, 3), false, 0},
		{"entries, sync", nil, entries(2, 4, 4), true, 1},
	}
	for _, tt := range tests {
		before := s.Syncs()
		if err := s.Save(tt.hs, tt.ents, tt.sync); err != nil {
			t.Fatalf("%s: Save: %v", tt.name, err)
		}
		if got := s.Syncs() - before; got != tt.wantSyncs {
			t.Errorf("%s: %d fdatasyncs, want %d", tt.name, got, tt.wantSyncs)
		}
	}
}

// TestSnapshotWrittenInPieces: a snapshot file is synced after every
// snapFlushEvery bytes of its data, and once at the end, and reads back
// whole.
func TestSnapshotWrittenInPieces(t *testing.T) {
	defer func(n int, f func(*os.File) error) { snapFlushEvery, fdatasync = n, f }(snapFlushEvery, fdatasync)
	snapFlushEvery = 1000
	var sizes []int64
	fdatasync = func(f *os.File) error {
		if fi, err := f.Stat(); err == nil {
			sizes = append(sizes, fi.Size())
		}
		return f.Sync()
	}
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), 350) // 3,500 bytes: 4 pieces
	md := &raftpb.SnapshotMetadata{Index: new(uint64(7)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}
	if err := writeSnapshot(dir, &raftpb.Snapshot{Data: data, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 4 {
		t.Fatalf("%d syncs (file sizes %v), want 3 between the 4 pieces and 1 at the end", len(sizes), sizes)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			t.Fatalf("file sizes at the syncs %v do not grow", sizes)
		}
	}
	got, err := readSnapshot(filepath.Join(dir, snapName(2, 7)), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.GetData(), data) || got.GetMetadata().GetIndex() != 7 {
		t.Fatalf("read back %d bytes at index %d", len(got.GetData()), got.GetMetadata().GetIndex())
	}
}
