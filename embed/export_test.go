package embed

import "github.com/batonlock/baton/internal/raftnode"

// RaftNode is m's Raft node, for the tests of this package that look
// inside a member (its membership, its snapshots, its state machine).
func RaftNode(m *Member) *raftnode.Node { return m.node }

// LogVersionDue is the log version m's node would raise the cluster's to
// now (raftnode.Config.LogVersionDue), if it leads.
func LogVersionDue(m *Member) (uint32, bool) { return m.logVersionDue(m.node.Membership()) }
