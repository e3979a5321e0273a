package embed

import (
	"context"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/raftnode"
)

// logVersionEvery is how often a leader reading more than the cluster's
// log version looks whether it may raise it: a new cluster starts at 1,
// and its first leader raises it as soon as it has heard from every
// member. (A look is a few map reads.)
const logVersionEvery = 50 * time.Millisecond

// readsLogVersion is the newest log version this member reads.
func (m *Member) readsLogVersion() uint32 {
	if m.cfg.LogVersion != 0 {
		return m.cfg.LogVersion
	}
	return fsm.LogVersion
}

// raiseLogVersion runs until ctx ends. While this member leads and the
// cluster's log version is below what it reads, it raises the version to
// the lowest that every voter and learner said (in its transport Hello)
// it reads, once it has heard from all of them. Members are upgraded one
// by one; when the last one says Hello, the cluster moves on.
func (m *Member) raiseLogVersion(ctx context.Context) {
	t := time.NewTicker(logVersionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !m.node.IsLeader() || m.node.LogVersion() >= m.readsLogVersion() {
			continue
		}
		v, ok := m.membersLogVersion()
		if !ok || v <= m.node.LogVersion() {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _, err := m.node.Propose(pctx, &fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: v}}})
		cancel()
		if err != nil {
			m.log.Warn("raising the cluster's log version", "to", v, "err", err)
			continue
		}
		m.log.Info("raised the cluster's log version: every member reads it", "log_version", v)
	}
}

// membersLogVersion is the lowest log version the members read; ok is
// false while one of them has not been heard from.
func (m *Member) membersLogVersion() (v uint32, ok bool) {
	return m.logVersionDue(m.node.Membership())
}

// logVersionDue is raftnode.Config.LogVersionDue: the lowest log version
// the members of ms read, as their Hellos said.
func (m *Member) logVersionDue(ms raftnode.Membership) (v uint32, ok bool) {
	return raftnode.MembersLogVersion(ms, MemberID(m.cfg.Name), m.readsLogVersion(), m.tr.PeerLogVersion)
}
