package sim

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/raftnode"
)

var ctxBackground = context.Background()

// request is what a client (or a stranger) sends to a member.
type request struct {
	from    asker
	attempt uint64
	kind    reqKind
	cmd     *fsmpb.Command // open, acquire, release, close, cancel
	session uint64         // keepalive, renewal
	secret  []byte         // keepalive, renewal: the hash of the secret shown (commands carry theirs)
	lock    string         // check, renewal
	token   uint64         // check, renewal
}

type reqKind int

const (
	reqPropose reqKind = iota
	reqKeepAlive
	reqCheck
	reqRenewHold
)

// response is what a member answers.
type response struct {
	attempt uint64
	// notLeader: nothing was done; retry at hint (0 = unknown).
	notLeader bool
	hint      uint64
	// unknown: the request may or may not have taken effect.
	unknown bool
	// retry: refused before anything was proposed (overload).
	retry bool
	res   *fsmpb.Result
	index uint64
	// keepalive, renewal (ttl is the hold limit). mismatch: refused, the
	// request did not show the session's secret (liveness.ErrSecretMismatch).
	lost, mismatch bool
	ttl            time.Duration
	// check: whether the token holds, and the holder's value
	held  bool
	value string
	// queued: an interim notice that the acquire is waiting in the queue.
	queued bool
	// noSpace: refused NO_SPACE (the leader's disk guard, space.go);
	// nothing was done.
	noSpace bool
	// wait outcome pushed by the hub
	grant *fsmpb.Grant
	ended *fsmpb.WaitEnded
}

type waitID struct{ session, seq uint64 }

// expectation is the hub's record of a queued acquire waiting for its
// grant on this member (internal/server/hub.go).
type expectation struct {
	req    *request
	queued bool // the acquire's own result said QUEUED
	grant  *fsmpb.Grant
	ended  *fsmpb.WaitEnded
}

type pendingProp struct {
	req *request
	f   *raftnode.Future
	// internal: proposed by the member itself (liveness tracker, or a
	// cleanup for a caller that went away), not a client.
	internal *internalOp
	then     func(res *fsmpb.Result, err error)
	// refusal: the seq fence of req's NO_SPACE refusal (space.go).
	refusal bool
}

type pendingRead struct {
	req      *request
	f        *raftnode.ReadFuture
	received time.Time
	// admit: the read barrier of req, a proposal the disk guard holds
	// (space.go).
	admit bool
}

// server mirrors internal/server's request handling for one incarnation of
// a member, on the non-blocking raftnode API. It is the member's
// raftnode.Observer.
type server struct {
	m      *member
	dead   bool
	props  []*pendingProp
	reads  []*pendingRead
	expect map[waitID]*expectation
	dirty  bool // applied something since the last state check
}

// Applied implements raftnode.Observer: the tracker follows the state,
// the checker records the log, the hub pushes wait outcomes.
func (v *server) Applied(index uint64, cmd *fsmpb.Command, res *fsmpb.Result) {
	m := v.m
	v.dirty = true
	m.tracker.Applied(res)
	m.s.chk.applied(m, index, cmd, res)
	for _, g := range res.GetGrants() {
		if e := v.expect[waitID{g.GetSessionId(), g.GetAcquireSeq()}]; e != nil && e.grant == nil && e.ended == nil {
			e.grant = g
		}
	}
	for _, w := range res.GetWaitsEnded() {
		if e := v.expect[waitID{w.GetSessionId(), w.GetAcquireSeq()}]; e != nil && e.grant == nil && e.ended == nil {
			e.ended = w
		}
	}
	for _, h := range res.GetHoldsRevoked() {
		m.s.revokeTold(h)
	}
}

// MembershipApplied implements raftnode.MembershipObserver: the checker
// records membership changes beside the commands.
func (v *server) MembershipApplied(index uint64, cc *raftpb.ConfChange) {
	v.m.s.chk.appliedConf(v.m, index, cc)
}

// Flush implements raftnode.Observer. The simulated server answers as it
// goes: a response is an event on the virtual clock, not a socket write.
func (v *server) Flush() {}

func (v *server) Restored(uint64) {}

// LeaderChanged implements raftnode.Observer.
func (v *server) LeaderChanged(isLeader bool, term uint64, fm *fsm.Machine) {
	m := v.m
	m.s.tracef("leader %d %v term %d", m.id, isLeader, term)
	if isLeader {
		m.s.stats.Elections++
		m.tracker.Promote(term, fm)
		return
	}
	m.tracker.Demote()
	// The hub drops every wait: its clients follow the new leader.
	for _, id := range sortedWaitIDs(v.expect) {
		e := v.expect[id]
		delete(v.expect, id)
		m.s.respond(e.req, &response{unknown: true})
	}
}

// handle is a request's arrival at this member.
func (v *server) handle(r *request) {
	m := v.m
	switch r.kind {
	case reqPropose:
		r.cmd.WallTimeUnixNano = m.s.Now().UnixNano()
		if !v.admitGrowth(r) {
			v.propose(r)
		}
	case reqKeepAlive:
		// server.keepAlive: receive time, Check, ReadIndex, Heartbeat.
		received := m.s.Now()
		if err := m.tracker.Check(r.session, r.secret); err != nil {
			m.s.respond(r, v.keepAliveError(err))
			return
		}
		f, err := m.node.StartRead()
		if err != nil {
			m.s.respond(r, submitError(err))
			return
		}
		v.reads = append(v.reads, &pendingRead{req: r, f: f, received: received})
	case reqCheck:
		f, err := m.node.StartRead()
		if err != nil {
			m.s.respond(r, submitError(err))
			return
		}
		v.reads = append(v.reads, &pendingRead{req: r, f: f})
	case reqRenewHold:
		// server.renewHold: receive time, CheckHold, ReadIndex, RenewHold.
		received := m.s.Now()
		if err := m.tracker.CheckHold(r.lock, r.session, r.token, r.secret); err != nil {
			m.s.respond(r, v.keepAliveError(err))
			return
		}
		f, err := m.node.StartRead()
		if err != nil {
			m.s.respond(r, submitError(err))
			return
		}
		v.reads = append(v.reads, &pendingRead{req: r, f: f, received: received})
	}
	m.pump()
}

// propose submits r's command, with the hub's expectation of a wait's
// outcome.
func (v *server) propose(r *request) {
	m, cmd := v.m, r.cmd
	if a := cmd.GetAcquire(); a != nil && a.GetWait() {
		id := waitID{cmd.GetSessionId(), cmd.GetSeq()}
		v.expect[id] = &expectation{req: r}
	}
	f, err := m.node.Submit(cmd)
	if err != nil {
		delete(v.expect, waitID{cmd.GetSessionId(), cmd.GetSeq()})
		m.s.respond(r, submitError(err))
		return
	}
	v.props = append(v.props, &pendingProp{req: r, f: f})
}

// logVersionDue is raftnode.Config.LogVersionDue, from what the members
// that sent to this process said they read.
func (m *member) logVersionDue(ms raftnode.Membership) (uint32, bool) {
	return raftnode.MembersLogVersion(ms, m.id, m.reads, func(id uint64) (uint32, bool) {
		hv, ok := m.heard[id]
		return hv, ok
	})
}

func (v *server) keepAliveError(err error) *response {
	if !v.m.node.IsLeader() {
		return &response{notLeader: true, hint: v.m.node.Leader()}
	}
	if errors.Is(err, liveness.ErrSecretMismatch) {
		return &response{mismatch: true}
	}
	return &response{lost: true}
}

func submitError(err error) *response {
	var nl *raftnode.NotLeaderError
	var fe *fsm.Error
	switch {
	case errors.Is(err, errNoSpace):
		return &response{noSpace: true}
	case errors.As(err, &nl):
		return &response{notLeader: true, hint: nl.Leader}
	case errors.Is(err, raftnode.ErrOverloaded):
		return &response{retry: true}
	case errors.Is(err, raftnode.ErrLogVersion):
		// Refused before it was proposed (FAILED_PRECONDITION), once its
		// seq fence settled the seq.
		return &response{res: &fsmpb.Result{Error: fsmpb.Error_ERROR_INVALID_ARGUMENT, Message: err.Error()}}
	case errors.As(err, &fe):
		// The log refused the seq of a request refused before it was
		// proposed: what its seq fence found.
		return &response{res: &fsmpb.Result{Error: fe.Code, Message: fe.Msg}}
	default:
		return &response{unknown: true}
	}
}

func done(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// poll answers every request whose proposal or read completed, in the
// order they arrived.
func (v *server) poll() {
	m := v.m
	keep := v.props[:0]
	for _, p := range v.props {
		if !done(p.f.Done()) {
			keep = append(keep, p)
			continue
		}
		res, index, err := p.f.Wait(ctxBackground)
		if p.refusal {
			v.refusalDone(p, err)
			continue
		}
		if p.internal != nil {
			m.s.chk.internalDone(p.internal, res, index, err)
			if p.then != nil {
				p.then(res, err)
			}
			continue
		}
		if err != nil {
			delete(v.expect, waitID{p.req.cmd.GetSessionId(), p.req.cmd.GetSeq()})
			m.s.respond(p.req, submitError(err))
			continue
		}
		m.s.chk.acked(m, p.req, res, index)
		id := waitID{p.req.cmd.GetSessionId(), p.req.cmd.GetSeq()}
		if e := v.expect[id]; e != nil {
			if res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED && fsm.ErrorOf(res) == nil {
				e.queued = true
				m.s.respond(p.req, &response{queued: true})
				continue // the hub answers when the wait ends
			}
			delete(v.expect, id)
		}
		m.s.respond(p.req, &response{res: res, index: index})
	}
	v.props = keep
	// The hub answers the queued acquires whose wait ended, in order of
	// (session, seq); poll runs after every loop turn, and seldom finds one.
	var ended []waitID
	for id, e := range v.expect {
		if e.queued && (e.grant != nil || e.ended != nil) {
			ended = append(ended, id)
		}
	}
	sortWaitIDs(ended)
	for _, id := range ended {
		e := v.expect[id]
		delete(v.expect, id)
		m.s.respond(e.req, &response{grant: e.grant, ended: e.ended})
	}
	rkeep := v.reads[:0]
	for _, r := range v.reads {
		if !done(r.f.Done()) {
			rkeep = append(rkeep, r)
			continue
		}
		if err := r.f.Err(); err != nil {
			m.s.respond(r.req, submitError(err))
			continue
		}
		if r.admit {
			v.admitted(r.req)
			continue
		}
		switch r.req.kind {
		case reqKeepAlive:
			ttl, err := m.tracker.Heartbeat(r.req.session, r.received)
			if err != nil {
				m.s.respond(r.req, v.keepAliveError(err))
				continue
			}
			m.s.respond(r.req, &response{ttl: ttl})
		case reqCheck:
			var held bool
			var value string
			m.node.View(func(fm *fsm.Machine) {
				held, _ = fm.Check(r.req.lock, r.req.token)
				if l, ok := fm.Lock(r.req.lock); ok && len(l.GetHolders()) > 0 {
					value = l.GetHolders()[0].GetValue()
				}
			})
			m.s.respond(r.req, &response{held: held, value: value})
		case reqRenewHold:
			limit, err := m.tracker.RenewHold(r.req.lock, r.req.session, r.req.token, r.received)
			if err != nil {
				m.s.respond(r.req, v.keepAliveError(err))
				continue
			}
			m.s.respond(r.req, &response{ttl: limit})
		}
	}
	v.reads = rkeep
}

func sortedWaitIDs(m map[waitID]*expectation) []waitID {
	ids := make([]waitID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sortWaitIDs(ids)
	return ids
}

func sortWaitIDs(ids []waitID) {
	slices.SortFunc(ids, func(a, b waitID) int {
		if c := cmp.Compare(a.session, b.session); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
}

// simProposer is the liveness tracker's Proposer on a member: it queues
// the command on the member's node and returns at once (the tracker is
// manual); the checker records the proposal as an operation.
type simProposer struct{ v *server }

func (p simProposer) ExpireSession(_ context.Context, id uint64) error {
	return p.submit(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: id}}},
		&internalOp{kind: opExpire, session: id})
}

func (p simProposer) CancelWait(_ context.Context, lock string, session, seq uint64) error {
	return p.submit(&fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: lock, SessionId: session, AcquireSeq: seq, TimedOut: true,
	}}}, nil)
}

func (p simProposer) ExpireHold(_ context.Context, lock string, session, token uint64, ownerKey string) error {
	return p.submit(&fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{
		Lock: lock, SessionId: session, Token: token, OwnerKey: &ownerKey,
	}}}, &internalOp{kind: opExpireHold, session: session, owner: ownerKey, lock: lock, token: token})
}

func (p simProposer) EndRevokedHold(_ context.Context, lock string, session, token uint64) error {
	return p.submit(&fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: &fsmpb.EndRevokedHold{
		Lock: lock, SessionId: session, Token: token,
	}}}, &internalOp{kind: opEndRevoked, session: session, lock: lock, token: token})
}

func (p simProposer) EndLockDelay(_ context.Context, lock string, delayFrom uint64) error {
	return p.submit(&fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{
		Lock: lock, DelayFrom: delayFrom,
	}}}, nil)
}

// abandon is server.abandonWait: the caller of the queued acquire
// (session, seq) went away, so one CancelWait marked abandoned goes through
// consensus; it removes the waiter, or releases a grant that crossed it,
// unless a retry of the request claimed it first. Only a call already
// waiting in the queue is abandoned (a caller leaving during the propose
// leaves its outcome to the log, as the server does). The checker records
// it as an operation that may release the session's hold: its result says
// whether it did, and with which token.
func (v *server) abandon(session, seq uint64) {
	id := waitID{session, seq}
	e := v.expect[id]
	if v.dead || e == nil || !e.queued {
		return
	}
	delete(v.expect, id)
	lock := e.req.cmd.GetAcquire().GetLock()
	cw := &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: lock, SessionId: session, AcquireSeq: seq, Abandoned: true,
	}}}
	_ = simProposer{v}.submit(cw, &internalOp{kind: opAbandon, session: session, owner: e.req.cmd.GetAcquire().GetOwnerKey(), lock: lock})
	v.m.pump()
}

func (p simProposer) submit(cmd *fsmpb.Command, op *internalOp) error {
	return p.submitThen(cmd, op, nil)
}

func (p simProposer) submitThen(cmd *fsmpb.Command, op *internalOp, then func(*fsmpb.Result, error)) error {
	v := p.v
	if v.dead {
		return raftnode.ErrStopped
	}
	cmd.WallTimeUnixNano = v.m.s.Now().UnixNano()
	f, err := v.m.node.Submit(cmd)
	if err != nil {
		return err
	}
	if op == nil {
		op = &internalOp{kind: opNone}
	}
	op.key = proposalKey(cmd)
	v.m.s.chk.internalStart(op)
	v.props = append(v.props, &pendingProp{f: f, internal: op, then: then})
	return nil
}
