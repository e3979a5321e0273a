package storage

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
)

// walFsyncs returns how many fdatasyncs etcd's WAL has done in this process,
// from its etcd_disk_wal_fsync_duration_seconds histogram.
func walFsyncs(t *testing.T) uint64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_disk_wal_fsync_duration_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("wal fsync metric not registered")
	return 0
}

// TestSaveSync pins when Save fdatasyncs: always when sync is true, and
// also when etcd's WAL decides to by itself (raft.MustSync).
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
		{"commit only, sync", hardState(1, 1, 2), nil, true, 1}, // etcd would skip it
		{"commit only, no sync", hardState(1, 1, 2), nil, false, 0},
		{"vote change, sync", hardState(2, 2, 2), nil, true, 1},
		{"nothing, sync", nil, nil, true, 1}, // flushes earlier unsynced saves
		{"nothing, no sync", nil, nil, false, 0},
		// etcd syncs entries whatever the caller says.
		{"entries, no sync", nil, entries(2, 3, 3), false, 1},
	}
	for _, tt := range tests {
		before := walFsyncs(t)
		if err := s.Save(tt.hs, tt.ents, tt.sync); err != nil {
			t.Fatalf("%s: Save: %v", tt.name, err)
		}
		if got := walFsyncs(t) - before; got != tt.wantSyncs {
			t.Errorf("%s: %d fdatasyncs, want %d", tt.name, got, tt.wantSyncs)
		}
	}
}
