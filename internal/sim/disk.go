package sim

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/raftnode"
)

// diskState is what one member's log holds: the last hard state, the
// entries, and every snapshot saved. Like the WAL, a snapshot does not
// change the hard state, and recovery uses the newest snapshot the hard
// state has committed (storage.Open reads wal.ValidSnapshotEntries, etcd's
// guard against a snapshot whose hard state a crash lost).
type diskState struct {
	hs    *raftpb.HardState
	ents  []*raftpb.Entry
	snaps []*raftpb.Snapshot
}

func (d diskState) clone() diskState {
	return diskState{hs: d.hs, ents: append([]*raftpb.Entry(nil), d.ents...), snaps: append([]*raftpb.Snapshot(nil), d.snaps...)}
}

func (d *diskState) save(hs *raftpb.HardState, ents []*raftpb.Entry) {
	if hs != nil && (hs.GetTerm() != 0 || hs.GetVote() != 0 || hs.GetCommit() != 0) {
		d.hs = hs
	}
	if len(ents) > 0 {
		first := ents[0].GetIndex()
		kept := d.ents[:0:0]
		for _, e := range d.ents {
			if e.GetIndex() < first {
				kept = append(kept, e)
			}
		}
		d.ents = append(kept, ents...)
	}
}

// saveSnapshot records snap and, like the store's WAL purge at its most
// eager, drops the entries up to prev, the snapshot saved before it in
// this run or recovered at the member's start (the store releases no
// further: prev is what recovery falls back to until a hard state commits
// the new one). A recovery that has to fall back further finds a gap
// instead of silently replaying entries a real WAL may already have
// deleted.
func (d *diskState) saveSnapshot(snap *raftpb.Snapshot, prev uint64) {
	d.snaps = append(d.snaps, snap)
	kept := d.ents[:0:0]
	for _, e := range d.ents {
		if e.GetIndex() > prev {
			kept = append(kept, e)
		}
	}
	d.ents = kept
}

// write is one unsynced Save.
type write struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

// disk is a member's simulated disk, a raftnode.LogStore. Synced writes
// and snapshots are durable; unsynced writes sit in a page cache that a
// crash loses, except for a prefix the "kernel" already wrote back, whose
// last write may be torn (only a prefix of its entries survives, its hard
// state does not).
type disk struct {
	durable diskState
	cache   []write // unsynced, in order
	fsyncs  uint64
	// tearNext (0 = off) makes the next Save crash the machine midway:
	// what was cached is written back, the new write keeps tearNext-1 of
	// its entries and no hard state, and Save fails so the node stops
	// before it sends or acknowledges anything.
	tearNext int
	tore     bool
	// prevSnap is the index of the snapshot saved last since the member
	// started, or of the one it recovered, as storage.Store keeps it: a
	// snapshot saved before a crash that lost the hard state committing
	// it is not recovered, so it is not what the next save releases up to.
	prevSnap uint64
}

func (d *disk) Save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if d.tearNext > 0 {
		keep := d.tearNext - 1
		d.tearNext = 0
		d.flush(len(d.cache), -1)
		for i := range min(keep, len(ents)) {
			d.durable.save(nil, []*raftpb.Entry{proto.Clone(ents[i]).(*raftpb.Entry)})
		}
		d.tore = true
		return errIO
	}
	w := write{ents: make([]*raftpb.Entry, len(ents))}
	if hs != nil {
		w.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	for i, e := range ents {
		w.ents[i] = proto.Clone(e).(*raftpb.Entry)
	}
	d.cache = append(d.cache, w)
	if sync {
		d.flush(len(d.cache), -1)
		d.fsyncs++
	}
	return nil
}

func (d *disk) SaveSnapshot(snap *raftpb.Snapshot) error {
	// The snapshot file is written and fsynced on its own; the WAL before
	// it is flushed first (as etcd's WAL does when it records a snapshot).
	d.flush(len(d.cache), -1)
	if snap.GetMetadata().GetIndex() <= d.prevSnap {
		return nil // stale, as storage.Store ignores it
	}
	d.durable.saveSnapshot(proto.Clone(snap).(*raftpb.Snapshot), d.prevSnap)
	d.prevSnap = snap.GetMetadata().GetIndex()
	return nil
}

// Snapshot returns the newest snapshot saved, as storage.Store does.
func (d *disk) Snapshot() (*raftpb.Snapshot, error) {
	var newest *raftpb.Snapshot
	for _, sn := range d.durable.snaps {
		if newest == nil || sn.GetMetadata().GetIndex() > newest.GetMetadata().GetIndex() {
			newest = sn
		}
	}
	if newest == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return proto.Clone(newest).(*raftpb.Snapshot), nil
}

// flush makes the first n cached writes durable; if tornEnts >= 0 the
// n-th keeps only its first tornEnts entries and loses its hard state.
func (d *disk) flush(n, tornEnts int) {
	for i := range n {
		w := d.cache[i]
		if i == n-1 && tornEnts >= 0 {
			d.durable.save(nil, w.ents[:min(tornEnts, len(w.ents))])
			continue
		}
		d.durable.save(w.hs, w.ents)
	}
	d.cache = d.cache[n:]
}

// crash loses the page cache but a random written-back prefix, maybe torn.
// It reports whether a write was torn.
func (d *disk) crash(r randSource) bool {
	torn := false
	if n := len(d.cache); n > 0 {
		keep := r.IntN(n + 1)
		t := -1
		if keep > 0 && r.IntN(2) == 0 {
			t = r.IntN(len(d.cache[keep-1].ents) + 1)
			torn = true
		}
		d.flush(keep, t)
	}
	d.cache = nil
	return torn
}

// recovered is what storage.Open would return: the newest snapshot at or
// below the hard state's commit, the hard state, and the entries after the
// snapshot. Like Open, it makes that snapshot the one the next save
// releases the log up to. A gap in those entries is an error (the WAL reports
// ErrSliceOutOfRange).
func (d *disk) recovered() (raftnode.Recovered, error) {
	st := d.durable.clone()
	var snap *raftpb.Snapshot
	for _, sn := range st.snaps {
		md := sn.GetMetadata()
		if md.GetIndex() <= st.hs.GetCommit() && md.GetTerm() <= st.hs.GetTerm() &&
			(snap == nil || md.GetIndex() > snap.GetMetadata().GetIndex()) {
			snap = sn
		}
	}
	rec := raftnode.Recovered{}
	next := uint64(1)
	d.prevSnap = 0
	if snap != nil {
		rec.Snapshot = proto.Clone(snap).(*raftpb.Snapshot)
		next = snap.GetMetadata().GetIndex() + 1
		d.prevSnap = snap.GetMetadata().GetIndex()
	}
	for _, e := range st.ents {
		if e.GetIndex() < next {
			continue
		}
		if e.GetIndex() != next {
			return rec, fmt.Errorf("wal has entry %d after %d: gap", e.GetIndex(), next-1)
		}
		rec.Entries = append(rec.Entries, proto.Clone(e).(*raftpb.Entry))
		next++
	}
	if st.hs != nil {
		rec.HardState = proto.Clone(st.hs).(*raftpb.HardState)
	}
	return rec, nil
}

type randSource interface{ IntN(n int) int }

// errIO is the simulated disk's failure when a machine crashes mid-write.
var errIO = errors.New("sim: disk write interrupted by crash")
