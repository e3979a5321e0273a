package raftnode

import (
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestNewLeaderWaitsForSilentMembersVersions: while a member has not said
// which log version it reads, a new leader asks the caller to retry a
// command that needs a newer version than the cluster's (an open with a
// secret's hash), for two election timeouts of its lead; then it writes
// the command stripped to what the cluster reads, as for a member known
// to be older.
func TestNewLeaderWaitsForSilentMembersVersions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &queueNet{}
	cfg.Recovered = cfg.Store.(*memStore).recovered()
	cfg.LogVersionDue = func(Membership) (uint32, bool) { return 0, false } // someone is silent
	n, err := StartManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for i := 0; !n.IsLeader() || !n.caughtUp.Load(); i++ {
		if i > 200 {
			t.Fatal("no leader")
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
	}
	open := func() (*fsmpb.Command, error) {
		cmd := &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
			TtlNanos: int64(10 * time.Second), SecretHash: make([]byte, 32)}}}
		cmd.GetOpenSession().SecretHash[0] = 1
		_, err := n.Submit(cmd)
		return cmd, err
	}
	var nl *NotLeaderError
	if _, err := open(); !errors.As(err, &nl) {
		t.Fatalf("an open as the lead begins, a member silent: %v; want a retry", err)
	}
	for n.ledTicks.Load() < int64(versionGraceElections*cfg.ElectionTicks) {
		if cmd, err := open(); !errors.As(err, &nl) || nl.Leader != cfg.ID || len(cmd.GetOpenSession().GetSecretHash()) == 0 {
			t.Fatalf("an open %d ticks into the lead, a member silent: %v (hash kept: %v); want a retry naming the leader",
				n.ledTicks.Load(), err, len(cmd.GetOpenSession().GetSecretHash()) > 0)
		}
		if err := n.Tick(); err != nil {
			t.Fatal(err)
		}
		runDry(t, n)
	}
	cmd, err := open()
	if err != nil || len(cmd.GetOpenSession().GetSecretHash()) != 0 {
		t.Fatalf("an open after the grace: %v, hash %x; want it written for version %d, without the hash", err, cmd.GetOpenSession().GetSecretHash(), n.LogVersion())
	}
}
