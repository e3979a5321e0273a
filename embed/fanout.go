package embed

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/server"
)

// fanout is the node's one raftnode.Observer (and ApplyInspector: the
// server's watches read each watched lock as each command leaves it). On
// the Ready loop, every applied command goes first to the liveness tracker (sessions, timed
// waits and limited holds come and go), then to the API server, which
// hands it to whoever waits for it (unary acquires, session channels,
// watches); leadership changes promote or demote the tracker, and tell
// the server (which ends its session streams, or looks whether the
// cluster needs its first signing key).
//
// The node starts before the server (the server is built with its node),
// so the server is added once built; what applies before that has nobody
// waiting for it there.
type fanout struct {
	tracker *liveness.Tracker
	api     atomic.Pointer[server.Server]
}

func (f *fanout) Applied(index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	f.tracker.Applied(res)
	if s := f.api.Load(); s != nil {
		s.Deliver(index, cmd, res)
	}
}

func (f *fanout) Inspect(index uint64, cmd *fsmpb.Command, res *fsmpb.Result, m *fsm.Machine) {
	if s := f.api.Load(); s != nil {
		s.Inspect(index, cmd, res, m)
	}
}

func (f *fanout) Flush() {
	if s := f.api.Load(); s != nil {
		s.Flush()
	}
}

func (f *fanout) Restored(uint64) {
	if s := f.api.Load(); s != nil {
		s.Restored()
	}
}

func (f *fanout) LeaderChanged(isLeader bool, term uint64, m *fsm.Machine) {
	if isLeader {
		f.tracker.Promote(term, m)
		if s := f.api.Load(); s != nil {
			s.StartedLeading()
		}
		return
	}
	f.tracker.Demote()
	if s := f.api.Load(); s != nil {
		s.StoppedLeading()
	}
}

// expirer puts the liveness tracker's decisions into the log through the
// node (liveness.Proposer): a refusal means there was nothing left to end.
type expirer struct {
	node *atomicNode // set once the node started, before the tracker runs
	log  *slog.Logger
}

// expireTimeout bounds each of the tracker's proposals.
const expireTimeout = 5 * time.Second

func (e expirer) propose(ctx context.Context, cmd *fsmpb.Command) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, expireTimeout)
	defer cancel()
	cmd.WallTimeUnixNano = time.Now().UnixNano()
	res, _, err := e.node.Load().Propose(ctx, cmd)
	if err != nil {
		return false, err
	}
	return fsm.ErrorOf(res) == nil, nil
}

func (e expirer) ExpireSession(ctx context.Context, id uint64) error {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: id}}}
	if _, err := e.propose(ctx, cmd); err != nil {
		return err
	}
	e.log.Info("session expired", "session", id)
	return nil
}

func (e expirer) CancelWait(ctx context.Context, lock string, session, seq uint64) error {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: lock, SessionId: session, AcquireSeq: seq, TimedOut: true,
	}}}
	_, err := e.propose(ctx, cmd)
	return err
}

func (e expirer) ExpireHold(ctx context.Context, lock string, session, token uint64, ownerKey string) error {
	// The owner key is left out below log version 14 (fsm.ForLogVersion).
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{
		Lock: lock, SessionId: session, Token: token, OwnerKey: &ownerKey,
	}}}
	applied, err := e.propose(ctx, cmd)
	if applied {
		e.log.Info("hold limit passed: hold expired", "lock", lock, "session", session, "token", token)
	}
	return err
}

func (e expirer) EndRevokedHold(ctx context.Context, lock string, session, token uint64) error {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{
		Lock: lock, SessionId: session, Token: token,
	}}}
	applied, err := e.propose(ctx, cmd)
	if applied {
		e.log.Info("revoke grace passed: hold ended", "lock", lock, "session", session, "token", token)
	}
	return err
}

func (e expirer) EndLockDelay(ctx context.Context, lock string, delayFrom uint64) error {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{
		Lock: lock, DelayFrom: delayFrom,
	}}}
	applied, err := e.propose(ctx, cmd)
	if applied {
		e.log.Info("lock-delay passed", "lock", lock, "index", delayFrom)
	}
	return err
}
