// Package raftnode runs one Raft group of a Baton member: it owns the
// raft.RawNode, persists and sends what raft asks for, applies committed
// entries to the lock state machine, batches proposals and linearizable
// reads, and takes snapshots.
//
// Raft runs with AsyncStorageWrites. Two goroutines share the work:
//
// The Ready loop does everything that touches the RawNode or the state
// machine's writes. For each Ready it
//
//  1. sends the messages addressed to peers at once (the leader's MsgApps
//     go out while its own copy is still being written, Raft thesis
//     10.2.1; messages that promise durable state, such as a follower's
//     MsgAppResp or a vote, are not among them: raft attaches them to the
//     storage write as responses);
//  2. hands the MsgStorageAppend (entries, hard state, snapshot) to the
//     append worker;
//  3. applies the MsgStorageApply's committed entries, which raft hands
//     over only once they are durable on this node, and steps its
//     response back. Every normal entry is one fsmpb.Command; its result
//     goes to the waiting proposer and to the Observer. Conf-change
//     entries always go through ApplyConfChange;
//  4. answers ReadStates whose index is now applied.
//
// Every SnapshotEntries applied entries the loop starts a snapshot: it
// freezes the state machine at the applied index (fsm.Machine.Freeze,
// microseconds), and the rest happens off the loop in two steps while the
// loop goes on with everything, applying included. A goroutine encodes
// the frozen state; the loop then thaws it, and another goroutine saves
// the encoding. When it is saved the loop records it in raft's storage
// and compacts the log. A snapshot from the leader first waits for the
// encoding. Encoding a million locks takes most of a second, and saving
// it as long again: on the loop that stopped heartbeats against a
// one-second election timeout, and a state machine that held still while
// it was encoded kept clients waiting as long.
// A backup (Backup, backup.go) makes the next snapshot due at once and
// gets a copy of its encoding, made off the loop before the save.
//
// The append worker writes everything handed to it while its previous
// write ran as one write with one fdatasync (group commit), then delivers
// the responses: to peers directly, and to the loop, which steps them so
// raft learns what is durable. A snapshot from the leader is written by
// the worker and restored into the state machine by the loop just before
// raft hears it is applied. Snapshot data is kept on disk only: raft's
// MemoryStorage holds the metadata and reads the data back from the store
// when a follower needs it.
//
// Proposals arriving while the loop is busy are gathered and stepped into
// raft as one MsgProp, and appends queued during a write share the next
// fsync, so many commands share a write and a MsgApp per follower.
//
// In manual mode (StartManual) no goroutine runs: the caller drives the
// loop with Tick and Pump and completes writes with Persist, which is how
// the simulation puts a disk's latency, and crashes, between the two.
package raftnode
