package embed

import (
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/raftnode"
)

// readsLogVersion is the newest log version this member reads.
func (m *Member) readsLogVersion() uint32 {
	if m.cfg.LogVersion != 0 {
		return m.cfg.LogVersion
	}
	return fsm.LogVersion
}

// logVersionDue is raftnode.Config.LogVersionDue: the lowest log version
// the members of ms read, as their transport Hellos said. The leader's
// node raises the cluster's version to it (members are upgraded one by
// one; when the last one says Hello, the cluster moves on).
func (m *Member) logVersionDue(ms raftnode.Membership) (v uint32, ok bool) {
	return raftnode.MembersLogVersion(ms, MemberID(m.cfg.Name), m.readsLogVersion(), m.tr.PeerLogVersion)
}
