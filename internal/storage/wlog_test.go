package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestCrashInLastWrite is the log's safety property: a crash during a
// write loses at most that write, and what survives of it is a prefix of
// its records. Each round saves a run of synced writes (some overwriting
// a suffix of the log, as a new leader's entries do), then one more write
// of which a random set of sectors never reaches the disk (they keep their
// zeros), and checks that Open recovers every synced entry and hard state
// plus a prefix of the lost write.
func TestCrashInLastWrite(t *testing.T) {
	smallSegments(t, 16<<10) // cuts happen, and some land in the lost write
	rng := rand.New(rand.NewPCG(5, 17))
	for round := range 60 {
		dir := t.TempDir()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		var (
			model []*raftpb.Entry // the durable log, index i at model[i-1]
			hs    *raftpb.HardState
			term  uint64 = 1
		)
		apply := func(log []*raftpb.Entry, ents []*raftpb.Entry) []*raftpb.Entry {
			if len(ents) == 0 {
				return log
			}
			return append(log[:ents[0].GetIndex()-1:ents[0].GetIndex()-1], ents...)
		}
		randomWrite := func() ([]*raftpb.Entry, *raftpb.HardState) {
			lo := uint64(len(model)) + 1
			if len(model) > 0 && rng.IntN(5) == 0 { // overwrite a suffix
				lo = uint64(len(model)) - uint64(rng.IntN(min(len(model), 5)))
				term++
			}
			ents := entries(term, lo, lo+uint64(rng.IntN(8)))
			for _, e := range ents {
				e.Data = bytes.Repeat([]byte{byte(rng.IntN(255) + 1)}, rng.IntN(700))
			}
			return ents, hardState(term, 1, lo-1)
		}
		for range 5 + rng.IntN(40) {
			ents, h := randomWrite()
			if err := s.Save(h, ents, true); err != nil {
				t.Fatal(err)
			}
			model, hs = apply(model, ents), h
		}
		// The lost write: note the segments' bytes before it, write it,
		// then undo a random set of the sectors it changed in
		// the last segment (a cut in the middle of the write synced the
		// segments before).
		logDir := filepath.Join(dir, "log")
		before := readAll(t, logDir)
		ents, h := randomWrite()
		// Synced, so that it reaches the file in either way of writing
		// (a log writing directly keeps unsynced saves in memory); the
		// crash then takes sectors of it back.
		if err := s.Save(h, ents, true); err != nil {
			t.Fatal(err)
		}
		s.wal.closeFiles() // crash: no close, no sync
		s.wal.close()
		after := readAll(t, logDir)
		lost := 0
		segs, err := listSegments(logDir)
		if err != nil {
			t.Fatal(err)
		}
		{
			name := segs[len(segs)-1].name
			b, old := after[name], before[name]
			for off := 0; off < len(b); off += sectorSize {
				end := min(off+sectorSize, len(b))
				if off < len(old) && bytes.Equal(b[off:end], old[off:min(end, len(old))]) {
					continue
				}
				if rng.IntN(3) == 0 {
					clear(b[off:end])
					if off < len(old) {
						copy(b[off:end], old[off:min(end, len(old))])
					}
					lost++
				}
			}
			if err := os.WriteFile(filepath.Join(logDir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}

		s, err = Open(dir, nil)
		if err != nil {
			t.Fatalf("round %d (%d sectors lost): Open: %v", round, lost, err)
		}
		_, gotHS, got := s.State()
		// Some prefix of the lost write's entries survived, and its hard
		// state only if all of them did.
		ok := false
		for k := 0; k <= len(ents); k++ {
			want := apply(slices.Clone(model), ents[:k])
			wantHS := hs
			if k == len(ents) && proto.Equal(gotHS, h) {
				wantHS = h
			}
			if equalEntries(got, want) && proto.Equal(gotHS, wantHS) {
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("round %d (%d sectors lost): recovered %d entries (last %v) and %v; durable: %d entries and %v, lost write: %v..%v",
				round, lost, len(got), lastOf(got), gotHS, len(model), hs, ents[0].GetIndex(), lastOf(ents))
		}
		s.Close()
	}
}

func equalEntries(a, b []*raftpb.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y *raftpb.Entry) bool { return proto.Equal(x, y) })
}

func lastOf(ents []*raftpb.Entry) string {
	if len(ents) == 0 {
		return "none"
	}
	e := ents[len(ents)-1]
	return fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm())
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, de := range des {
		if _, ok := parseSegmentName(de.Name()); !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[de.Name()] = b
	}
	return m
}

// TestSegmentWithoutHeader: a crash right after a cut renamed the next
// segment into place, before its header reached the disk, leaves a last
// segment of zeros; Open drops it and goes on from the one before.
func TestSegmentWithoutHeader(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustSave(t, s, hardState(1, 1, 3), entries(1, 1, 5))
	mustClose(t, s)
	logDir := filepath.Join(dir, "log")
	segs, err := listSegments(logDir)
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(logDir, segmentName(segs[len(segs)-1].seq+1, 6))
	if err := os.WriteFile(next, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	checkState(t, s, nil, hardState(1, 1, 3), entries(1, 1, 5))
	// Its sequence number was taken again by the segment Open started.
	if ok, err := hasHeader(next, segs[len(segs)-1]); err == nil && ok {
		t.Errorf("%s has the header of the segment before it", next)
	}
	if ok, err := hasHeader(next, segment{seq: segs[len(segs)-1].seq + 1, first: 6, name: filepath.Base(next)}); err != nil || !ok {
		t.Errorf("%s: header %v, %v; want a new segment", next, ok, err)
	}
	mustSave(t, s, hardState(1, 1, 6), entries(1, 6, 6))
	mustClose(t, s)
	s = mustOpen(t, dir)
	checkState(t, s, nil, hardState(1, 1, 6), entries(1, 1, 6))
}

// TestMigrateEtcdWAL: a data directory of Baton 0.x (etcd's WAL and
// snapshot files) opens with everything in it, once converted.
func TestMigrateEtcdWAL(t *testing.T) {
	dir := t.TempDir()
	zl := newZapLogger(nil)
	w, err := wal.Create(zl, filepath.Join(dir, "wal"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Save(hardState(1, 1, 5), entries(1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	sn := testSnapshot(5, 1, "five")
	if err := os.MkdirAll(filepath.Join(dir, "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := snap.New(zl, filepath.Join(dir, "snap")).SaveSnap(sn); err != nil {
		t.Fatal(err)
	}
	if err := w.SaveSnapshot(walSnapshot(sn.GetMetadata())); err != nil {
		t.Fatal(err)
	}
	if err := w.Save(hardState(2, 2, 8), entries(2, 9, 12)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, dir)
	want := append(entries(1, 6, 8), entries(2, 9, 12)...)
	checkState(t, s, sn, hardState(2, 2, 8), want)
	if _, err := os.Stat(filepath.Join(dir, "wal")); !os.IsNotExist(err) {
		t.Errorf("old wal still in place: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal.migrated")); err != nil {
		t.Errorf("old wal not kept aside: %v", err)
	}
	mustSave(t, s, hardState(2, 2, 13), entries(2, 13, 13))
	mustClose(t, s)
	s = mustOpen(t, dir)
	checkState(t, s, sn, hardState(2, 2, 13), append(want, entries(2, 13, 13)...))
}

// TestDamagedSnapshotFallsBack: a snapshot file that fails its checksum is
// set aside as .broken and the previous one is used, with the log after
// it; a snapshot write cut short by a crash leaves only a .tmp file, which
// is ignored and removed.
func TestDamagedSnapshotFallsBack(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustSave(t, s, hardState(1, 1, 10), entries(1, 1, 10))
	five := testSnapshot(5, 1, "five")
	for _, sn := range []*raftpb.Snapshot{five, testSnapshot(8, 1, "eight")} {
		if err := s.SaveSnapshot(sn); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, s)
	newest := filepath.Join(dir, "snap", snapName(1, 8))
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 0x01 // in the data
	if err := os.WriteFile(newest, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "snap", snapName(1, 9)+".tmp")
	if err := os.WriteFile(tmp, []byte("baton-snap/1\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir)
	checkState(t, s, five, hardState(1, 1, 10), entries(1, 6, 10))
	if _, err := os.Stat(newest + ".broken"); err != nil {
		t.Errorf("damaged snapshot not set aside: %v", err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("leftover %s: %v", tmp, err)
	}
}

// A snapshot no newer than the last one saved is not written: the node's
// own, taken off its loop, can finish after a newer one from the leader.
func TestOlderSnapshotIgnored(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	mustSave(t, s, hardState(1, 1, 10), entries(1, 1, 10))
	eight := testSnapshot(8, 1, "eight")
	for _, sn := range []*raftpb.Snapshot{eight, testSnapshot(5, 1, "five")} {
		if err := s.SaveSnapshot(sn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "snap", snapName(1, 5))); !os.IsNotExist(err) {
		t.Errorf("the older snapshot was written: %v", err)
	}
	mustClose(t, s)
	s = mustOpen(t, dir)
	checkState(t, s, eight, hardState(1, 1, 10), entries(1, 9, 10))
}
