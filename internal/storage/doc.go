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
// Contract with the Raft node (see internal/raftnode, whose append worker
// writes the log and whose Ready loop takes snapshots):
//
//  1. A snapshot received from the leader: call SaveSnapshot before Save:
//     the snapshot file is written and synced first, then the WAL snapshot
//     record, so the WAL never points at a missing file. A WAL snapshot
//     record is trusted on restart only once a HardState with commit >= its
//     index was saved after it, which is what the following Save does.
//  2. Save(HardState, Entries, sync). Writing entry i logically discards
//     every persisted entry with index >= i; the discard is applied when the
//     log is read back by Open.
//  3. A snapshot of the node's own state machine: SaveSnapshot it only once
//     a HardState committing its index has been saved (the snapshot
//     record's sync makes that HardState durable too).
//
// SaveSnapshot releases the WAL only up to the previous snapshot: until a
// HardState commits the new one, a crash makes Open fall back to the
// previous one, which needs the entries after it. Old segment and snapshot
// files are deleted beyond KeepWALFiles and KeepSnapshots.
//
// A Store is safe for concurrent use; calls are serialised.
package storage
