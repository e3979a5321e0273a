// Package storage keeps the durable Raft log and snapshots of one Raft group
// on local disk.
//
// The log is Baton's own (wlog.go, segment.go): segment files of
// checksummed records, each segment zero-filled and synced before its
// first append. Appending then overwrites blocks the file system has
// already allocated and initialised, so an fdatasync flushes data and no
// allocation metadata (on ext4 without a journal the inode's block still
// goes out when the modification time moved, at most once per clock
// tick). etcd's WAL preallocates with fallocate instead: on ext4 every
// sync of it also commits a journal transaction to convert the written
// extents (BenchmarkSave measures the difference). On Linux the log writes with direct I/O
// where the file system takes it (not tmpfs): whole aligned blocks, the
// partial last one repeated from memory, and a synced write is one
// pwritev2 with RWF_DSYNC instead of a write and an fdatasync. That takes
// the device one trip per commit, and fewer system calls per flush;
// unsynced saves (a commit index alone) wait in memory for the
// next synced one. Snapshot files are Baton's too (snapfile.go):
// the state machine's encoding is written as it is, where etcd's
// snapshotter made two more copies of it first. The rest of Baton sees
// only raftpb types. A data directory of an older release, with etcd's
// WAL in wal/ and etcd's snapshot files, is converted on first Open
// (legacy.go); old snapshot files stay readable.
//
// Layout on disk, under the directory given to Open:
//
//	log/   segments (<seq>-<first index>.log), the first of an Open
//	       1 MB, each next twice the last up to 64 MB; next.tmp is
//	       the next one, being zero-filled in the background
//	snap/  snapshot files (<term>-<index>.snap), newest few kept
//
// Recovery reads the log to its end. A record that fails its checksum in
// the last segment is a torn write if a sector it reaches into never got
// to the disk (it is still all zeros from where the record starts in
// it): the log ends before it, a copy of the segment is kept as
// <name>.broken, and the segment is cut there. Any other damage fails
// Open with an error naming the segment and offset. Open always starts a
// new segment for its appends.
//
// Contract with the Raft node (see internal/raftnode, whose append worker
// writes the log and whose Ready loop takes snapshots):
//
//  1. A snapshot received from the leader: call SaveSnapshot before Save:
//     the snapshot file is written and synced first, then the log's
//     snapshot record, so the log never points at a missing file. A
//     snapshot record is trusted on restart only once a HardState with commit >= its
//     index was saved after it, which is what the following Save does.
//  2. Save(HardState, Entries, sync). Writing entry i logically discards
//     every persisted entry with index >= i; the discard is applied when the
//     log is read back by Open.
//  3. A snapshot of the node's own state machine: SaveSnapshot it only once
//     a HardState committing its index has been saved (the snapshot
//     record's sync makes that HardState durable too).
//
// SaveSnapshot releases the log only up to the previous snapshot: until a
// HardState commits the new one, a crash makes Open fall back to the
// previous one, which needs the entries after it. Old segment and snapshot
// files are deleted beyond KeepWALFiles and KeepSnapshots.
//
// A Store is safe for concurrent use; calls are serialised.
package storage
