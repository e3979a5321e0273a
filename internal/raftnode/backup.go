package raftnode

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/batonlock/baton/internal/fsm"
)

// Backup is the state machine's snapshot at one applied index, with what
// a new cluster seeded from it needs to know of the old one.
type Backup struct {
	// Index and Term are the Raft index and term of the last entry the
	// state reflects: every fencing token in Data is at most Index.
	Index, Term uint64
	// Voters and Learners are the group's configuration at Index;
	// Members every member the state machine recorded (removed ones
	// included), ClusterID the cluster's id.
	Voters, Learners []uint64
	Members          []fsm.Member
	ClusterID        uint64
	// LogVersion is the cluster's log version at Index.
	LogVersion uint32
	// Data is the state machine's encoding (fsm.Machine.Snapshot's bytes),
	// owned by the caller.
	Data []byte
}

// backupQuery asks the loop for a Backup at an applied index of at least
// min.
type backupQuery struct {
	min  uint64
	done chan backupResult // buffered: the saver never waits for the caller
}

type backupResult struct {
	b   Backup
	err error
}

// Backup takes a snapshot of the state machine at an applied index of at
// least the one applied when it is called, the way the node takes its
// own (Freeze on the loop, encoding and saving off it), and returns it.
// The snapshot is also saved as this node's newest: taking a backup
// costs one ordinary snapshot. Cancelling ctx stops the waiting, not the
// snapshot. Not in manual mode.
func (n *Node) Backup(ctx context.Context) (Backup, error) {
	if n.manual {
		return Backup{}, errors.New("raftnode: Backup needs the Ready loop")
	}
	q := &backupQuery{min: n.Status().Applied, done: make(chan backupResult, 1)}
	select {
	case n.backupC <- q:
	case <-n.doneC:
		return Backup{}, ErrStopped
	case <-ctx.Done():
		return Backup{}, ctx.Err()
	}
	select {
	case r := <-q.done:
		return r.b, r.err
	case <-n.doneC:
		return Backup{}, ErrStopped
	case <-ctx.Done():
		return Backup{}, ctx.Err()
	}
}

// queueBackup (on the loop) makes the next snapshot due at once and has it
// answer q. A snapshot already frozen may be older than q asks: q waits
// for the next one.
func (n *Node) queueBackup(q *backupQuery) {
	n.backupsDue = append(n.backupsDue, q)
	n.maybeSnapshot()
}

// retryBackups (on the loop, every tick) takes the snapshot queued
// backups wait for if it can be taken now. maybeSnapshot runs on every
// Ready, but a backup that found a snapshot under way, or the commit not
// yet logged, may see no further Ready on an idle node.
func (n *Node) retryBackups() {
	if len(n.backupsDue) > 0 {
		n.maybeSnapshot()
	}
}

// backupFrozen (on the loop, as maybeSnapshot freezes the state machine at
// b's index) hands the queued backups that index satisfies to the
// snapshot being taken, with what b needs besides the encoding.
func (n *Node) backupFrozen(b Backup) {
	due := n.backupsDue[:0]
	for _, q := range n.backupsDue {
		if q.min <= b.Index {
			n.encBackups = append(n.encBackups, q)
		} else {
			due = append(due, q)
		}
	}
	n.backupsDue = due
	if len(n.encBackups) == 0 {
		return
	}
	b.Voters = slices.Clone(n.confState.GetVoters())
	b.Learners = slices.Clone(n.confState.GetLearners())
	b.Members = n.m.Members()
	b.ClusterID = n.m.ClusterID()
	b.LogVersion = n.m.LogVersion()
	n.encBackup = b
}

// takeBackups (on the loop, once the snapshot is encoded) returns the
// function, to run off the loop before the encoding's memory is given
// back, that copies it for the backups waiting for it; nil if none.
func (n *Node) takeBackups() func(data []byte) {
	qs, b := n.encBackups, n.encBackup
	n.encBackups, n.encBackup = nil, Backup{}
	if len(qs) == 0 {
		return nil
	}
	return func(data []byte) {
		b.Data = bytes.Clone(data)
		for _, q := range qs {
			q.done <- backupResult{b: b}
		}
	}
}
