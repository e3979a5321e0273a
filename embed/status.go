package embed

import (
	"context"
	"errors"

	"github.com/batonlock/baton/internal/raftnode"
)

// The errors a member stops with by itself (Member.Err, once Member.Done
// is closed). Any other error is its log or its data dir failing.
var (
	// ErrRemoved: the member applied its own removal from the cluster
	// (RemoveMember). It is not a failure: `baton server` exits 0.
	ErrRemoved = raftnode.ErrRemoved
	// ErrLogLost: the leader knows this member had log entries that it no
	// longer has (its data dir was lost, wiped or rolled back). It must
	// not rejoin under its old name.
	ErrLogLost = raftnode.ErrLogLost
	// ErrAboveLogVersion: the member met an entry of a log version newer
	// than it reads (Config.LogVersion) and stopped rather than apply it.
	ErrAboveLogVersion = raftnode.ErrAboveLogVersion
)

// Status is a member's view of its cluster.
type Status struct {
	// ID is this member's Raft id (MemberID of its name); Leader is the
	// leader's, 0 while the member knows of none.
	ID, Leader uint64
	// Term is the Raft term the member is in.
	Term uint64
	// Commit is the highest log index it knows committed, Applied the
	// highest it applied.
	Commit, Applied uint64
	// LogVersion is the cluster's log version as of Applied: what the
	// member writes if it leads.
	LogVersion uint32
}

// Status returns the member's view of its cluster now.
func (m *Member) Status() Status {
	st := m.node.Status()
	return Status{ID: st.ID, Leader: st.Leader, Term: st.Term, Commit: st.Commit, Applied: st.Applied,
		LogVersion: m.node.LogVersion()}
}

// IsLeader reports whether the member believes it leads.
func (m *Member) IsLeader() bool { return m.node.IsLeader() }

// Done is closed when the member has stopped taking part in the cluster:
// after Close, or by itself (see Err). A member that stopped by itself
// still holds its ports, answering with errors, until Close.
func (m *Member) Done() <-chan struct{} { return m.node.Done() }

// Err is why the member stopped, once Done is closed: nil after Close,
// ErrRemoved, ErrLogLost, ErrAboveLogVersion, or the error its log or
// data dir gave.
func (m *Member) Err() error { return m.node.Err() }

// StepDown hands leadership to the voter whose log is furthest along, if
// this member leads and the group has another voter, and returns once
// that member leads: what `baton server` does on SIGTERM before Close, so
// that restarting the leader costs clients a retry, not an election
// timeout. It returns nil at once on a follower or a group of one; an
// error (the transfer did not complete within two election timeouts, or
// ctx ended) leaves this member as it was.
func (m *Member) StepDown(ctx context.Context) error {
	ms := m.node.Membership()
	if !m.node.IsLeader() || len(ms.Voters) < 2 {
		return nil
	}
	_, err := m.node.TransferLeadership(ctx, 0)
	var nl *raftnode.NotLeaderError
	if errors.As(err, &nl) {
		return nil // it stopped leading meanwhile
	}
	return err
}
