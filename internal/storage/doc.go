// Package storage keeps the durable Raft log and snapshots of one Raft group
// on local disk.
//
// A Store is a thin adapter over etcd's write-ahead log
// (go.etcd.io/etcd/server/v3/storage/wal) and snapshotter
// (go.etcd.io/etcd/server/v3/etcdserver/api/snap). Those packages are
// internal to etcd in all but name: their paths and types change between
// minor releases and they must match the raft version exactly. Nothing of
// them leaks through this package's API, so the rest of Baton sees only
// raftpb types.
//
// Layout on disk, under the directory given to Open:
//
//	wal/   WAL segments (<seq>-<index>.wal), each preallocated to 64 MB
//	snap/  snapshot files (<term>-<index>.snap), newest few kept
//
// Contract with the Ready loop (see internal/raftnode):
//
//  1. If Ready carries a snapshot, call SaveSnapshot before Save: the
//     snapshot file is written and synced first, then the WAL snapshot
//     record, so the WAL never points at a missing file. A WAL snapshot
//     record is trusted on restart only once a HardState with commit >= its
//     index was saved after it, which is what the following Save does.
//  2. Save(HardState, Entries, MustSync). Writing entry i logically discards
//     every persisted entry with index >= i; the discard is applied when the
//     log is read back by Open.
//  3. After the state machine takes a snapshot of its own, SaveSnapshot it;
//     the Store then releases WAL segments wholly before the snapshot and
//     deletes old segment and snapshot files.
//
// A Store is safe for concurrent use, but calls are serialised; the Ready
// loop is expected to be its only writer.
package storage
