package storage

import (
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
