// Package raftnode runs one Raft group of a Baton member: it owns the
// raft.RawNode, persists and sends what raft asks for, applies committed
// entries to the lock state machine, batches proposals and linearizable
// reads, and takes snapshots.
//
// One goroutine, the Ready loop, does everything that touches the RawNode
// or the state machine's writes, following the raft package's contract
// (go.etcd.io/raft/v3 doc.go) step by step for each Ready:
//
//  1. Persist: the snapshot (if any) and then the entries and HardState go
//     to the log store in one write, with one fdatasync when rd.MustSync.
//     The same entries are appended to the in-memory raft.Storage.
//  2. Send: only after step 1, so no peer hears of a vote or an entry that
//     this node could forget in a crash. The one exception is the leader,
//     which sends its MsgApps before writing the same entries to its own
//     disk (Raft thesis 10.2.1): the write still finishes before the next
//     Ready, so nothing is applied before the leader's copy is durable.
//     After sending a MsgSnap the node
//     reports the snapshot as finished (the transport delivers it whole or
//     reports the peer unreachable).
//  3. Apply: the snapshot first (state machine Restore), then committed
//     entries in log order. Every normal entry is one fsmpb.Command; its
//     result goes to the waiting proposer and to the Observer. Conf-change
//     entries always go through ApplyConfChange.
//  4. Answer ReadStates whose index is now applied, then Advance.
//
// Proposals arriving while the loop is busy with a Ready are gathered and
// stepped into raft as one MsgProp, so many commands share a Ready, one
// fsync and one MsgApp per follower (group commit).
package raftnode
