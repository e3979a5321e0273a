package server

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// cleanupTimeout bounds the proposals a server makes on behalf of a
// request whose caller went away (cancelling its wait).
const cleanupTimeout = 5 * time.Second

// OpenSession implements batonpb.BatonServer.
func (s *Server) OpenSession(ctx context.Context, r *batonpb.OpenSessionRequest) (*batonpb.OpenSessionResponse, error) {
	resp, err := s.openSession(ctx, r)
	return resp, s.toStatus(err)
}

func (s *Server) openSession(ctx context.Context, r *batonpb.OpenSessionRequest) (*batonpb.OpenSessionResponse, error) {
	cmd, secret, err := openCommand(r)
	if err != nil {
		return nil, err
	}
	if cmd.Principal, err = s.principal(ctx); err != nil {
		return nil, err
	}
	if err := s.admitGrowth(ctx, cmd); err != nil {
		return nil, err
	}
	res, err := s.proposeOpen(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &batonpb.OpenSessionResponse{
		SessionId: res.GetSessionId(),
		Ttl:       durationpb.New(time.Duration(cmd.GetOpenSession().GetTtlNanos())),
		Secret:    secret,
	}, nil
}

// CloseSession implements batonpb.BatonServer.
func (s *Server) CloseSession(ctx context.Context, r *batonpb.CloseSessionRequest) (*batonpb.CloseSessionResponse, error) {
	cmd, err := closeCommand(r.GetSessionId(), r.GetSeq())
	if err == nil {
		err = s.asCaller(ctx, cmd, r.GetSecret())
	}
	if err == nil {
		_, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &batonpb.CloseSessionResponse{}, nil
}

// Acquire implements batonpb.BatonServer. A waiting acquire holds the call
// open until the grant; if the caller goes away first, the wait is
// cancelled through consensus (and a grant that crossed the cancel is
// released in the same entry), so an abandoned HTTP request leaves no hold
// behind, unless a retry of it already claimed the answer.
func (s *Server) Acquire(ctx context.Context, r *batonpb.AcquireRequest) (*batonpb.AcquireResponse, error) {
	resp, err := s.acquire(ctx, r)
	return resp, s.toStatus(err)
}

func (s *Server) acquire(ctx context.Context, r *batonpb.AcquireRequest) (*batonpb.AcquireResponse, error) {
	arrived := time.Now()
	cmd, err := acquireCommand(r)
	if err != nil {
		return nil, err
	}
	s.defaultLockDelay(cmd, r.GetLockDelay() != nil)
	if err := s.asCaller(ctx, cmd, r.GetHeader().GetSecret()); err != nil {
		return nil, err
	}
	if err := s.admitGrowth(ctx, cmd); err != nil {
		return nil, err
	}
	id := waitID{cmd.GetSessionId(), cmd.GetSeq()}
	var events chan waitEvent
	if r.GetWait() {
		events = s.hub.expect(id)
		defer s.hub.forget(id, events)
	}
	res, err := s.propose(ctx, cmd)
	waited := func(granted bool) { s.locks.series(r.GetName()).observeWait(time.Since(arrived), granted) }
	if err != nil {
		if isRefusal(err) {
			waited(false)
		}
		return nil, err
	}
	out := acquireToWire(cmd.GetSeq(), res.GetAcquire(), lockDelayOf(cmd))
	if !out.Queued {
		s.signAcquire(out, cmd.GetSessionId(), modeOf(cmd))
		waited(out.Acquired)
		return out, nil
	}
	select {
	case ev := <-events:
		waited(ev.grant != nil)
		return s.waitOutcome(cmd, ev)
	case <-ctx.Done():
		waited(false)
		s.abandonWait(cmd, res.GetAcquire())
		return nil, ctx.Err()
	case <-s.stopC:
		return nil, errStreamNotLeader
	}
}

func (s *Server) waitOutcome(cmd *fsmpb.Command, ev waitEvent) (*batonpb.AcquireResponse, error) {
	if g := ev.grant; g != nil {
		out := &batonpb.AcquireResponse{Name: g.GetLock(), Seq: cmd.GetSeq(), Acquired: true, Token: g.GetToken(), Count: 1,
			LockDelay: durationOrNil(lockDelayOf(cmd))}
		s.signAcquire(out, cmd.GetSessionId(), modeOf(cmd))
		return out, nil
	}
	msg := "wait for " + ev.ended.GetLock() + " ended"
	if cycle := ev.ended.GetDeadlock(); cycle != nil {
		// A grant or cancel left the wait deadlocked: the refusal names
		// the cycle, as an acquire refused at once does.
		msg = fsm.DescribeCycle(cycle.GetEdges())
	}
	return nil, fsm.ErrorOf(&fsmpb.Result{Error: ev.ended.GetError(), Message: msg, Deadlock: ev.ended.GetDeadlock()})
}

// abandonWait undoes a queued acquire whose caller left, with one
// CancelWait marked abandoned: the state machine removes the waiter or, if
// the grant won the race, releases that grant in the same entry. Because it
// is one entry, a retry of the same (session, seq) is ordered either before
// it (the retry claims the request and the cleanup does nothing) or after
// it (the retry learns WAIT_CANCELLED); it is never told GRANTED for a hold
// the log then ends.
func (s *Server) abandonWait(cmd *fsmpb.Command, o *fsmpb.AcquireOutcome) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cw := &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: o.GetLock(), SessionId: cmd.GetSessionId(), AcquireSeq: cmd.GetSeq(), Abandoned: true,
	}}}
	res, err := s.propose(ctx, cw)
	switch {
	case err == nil && res.GetAcquire().GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		s.log.Debug("released abandoned grant", "lock", o.GetLock(), "session", cmd.GetSessionId(),
			"token", res.GetAcquire().GetToken())
	case err != nil && !isRefusal(err):
		s.log.Warn("cancel abandoned wait", "lock", o.GetLock(), "session", cmd.GetSessionId(), "err", err)
	}
}

// AcquireMany implements batonpb.BatonServer.
func (s *Server) AcquireMany(ctx context.Context, r *batonpb.AcquireManyRequest) (*batonpb.AcquireManyResponse, error) {
	resp, err := s.acquireMany(ctx, r)
	return resp, s.toStatus(err)
}

func (s *Server) acquireMany(ctx context.Context, r *batonpb.AcquireManyRequest) (*batonpb.AcquireManyResponse, error) {
	cmd, err := acquireManyCommand(r)
	if err != nil {
		return nil, err
	}
	s.defaultLockDelay(cmd, r.GetLockDelay() != nil)
	if err := s.asCaller(ctx, cmd, r.GetHeader().GetSecret()); err != nil {
		return nil, err
	}
	if err := s.admitGrowth(ctx, cmd); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := &batonpb.AcquireManyResponse{}
	for _, o := range res.GetAcquireMany() {
		a := acquireToWire(cmd.GetSeq(), o, lockDelayOf(cmd))
		s.signAcquire(a, cmd.GetSessionId(), modeOf(cmd))
		out.Results = append(out.Results, a)
	}
	return out, nil
}

// Release implements batonpb.BatonServer.
func (s *Server) Release(ctx context.Context, r *batonpb.ReleaseRequest) (*batonpb.ReleaseResponse, error) {
	cmd, err := releaseCommand(r)
	var res *fsmpb.Result
	if err == nil {
		err = s.asCaller(ctx, cmd, r.GetHeader().GetSecret())
	}
	if err == nil {
		res, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &batonpb.ReleaseResponse{RemainingCount: res.GetRemainingCount()}, nil
}

// CasRelease implements batonpb.BatonServer.
func (s *Server) CasRelease(ctx context.Context, r *batonpb.CasReleaseRequest) (*batonpb.CasReleaseResponse, error) {
	who, err := s.operator(ctx, "CasRelease")
	if err != nil {
		return nil, s.toStatus(err)
	}
	cmd, err := casReleaseCommand(r)
	if err == nil {
		cmd.Principal = who
		_, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &batonpb.CasReleaseResponse{}, nil
}

// Revoke implements batonpb.BatonServer.
func (s *Server) Revoke(ctx context.Context, r *batonpb.RevokeRequest) (*batonpb.RevokeResponse, error) {
	who, err := s.operator(ctx, "Revoke")
	if err != nil {
		return nil, s.toStatus(err)
	}
	cmd, err := revokeCommand(r)
	var res *fsmpb.Result
	if err == nil {
		cmd.Principal = who
		res, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("revoke requested", "lock", r.GetName(), "token", r.GetToken(), "holds", len(res.GetHoldsRevoked()))
	return &batonpb.RevokeResponse{Revoked: revokedToWire(res.GetHoldsRevoked())}, nil
}

// Blacklist implements batonpb.BatonServer.
func (s *Server) Blacklist(ctx context.Context, r *batonpb.BlacklistRequest) (*batonpb.BlacklistResponse, error) {
	who, err := s.operator(ctx, "Blacklist")
	if err != nil {
		return nil, s.toStatus(err)
	}
	cmd, err := blacklistCommand(r)
	if err == nil {
		cmd.Principal = who
		_, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("session blacklisted", "session", r.GetSessionId())
	return &batonpb.BlacklistResponse{}, nil
}

// Check implements batonpb.BatonServer (linearizable).
func (s *Server) Check(ctx context.Context, r *batonpb.CheckRequest) (*batonpb.CheckResponse, error) {
	who, err := s.reader(ctx, "name", r.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.CheckResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, r.GetName()); err != nil {
			return
		}
		held, h := m.Check(r.GetName(), r.GetToken())
		out.Held, out.Holder = held, holderToWire(h)
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// Get implements batonpb.BatonServer (linearizable).
func (s *Server) Get(ctx context.Context, r *batonpb.GetRequest) (*batonpb.GetResponse, error) {
	who, err := s.reader(ctx, "name", r.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.GetResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, r.GetName()); err != nil {
			return
		}
		if l, ok := m.Lock(r.GetName()); ok {
			out.Lock = lockToWire(l)
		}
		out.History = historyToWire(m, r.GetName())
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// History implements batonpb.BatonServer (linearizable): what Get
// answers in its history, with the applied index it is of.
func (s *Server) History(ctx context.Context, r *batonpb.HistoryRequest) (*batonpb.HistoryResponse, error) {
	who, err := s.reader(ctx, "name", r.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.HistoryResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, r.GetName()); err != nil {
			return
		}
		out.Holds = historyToWire(m, r.GetName())
		out.AppliedIndex, out.Replicated = m.AppliedIndex(), m.HistoryReplicated()
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// List implements batonpb.BatonServer (linearizable), in name order.
func (s *Server) List(ctx context.Context, r *batonpb.ListRequest) (*batonpb.ListResponse, error) {
	n, err := pageSize(r.GetPageSize())
	if err == nil {
		if perr := rules.CheckPrefix(r.GetPrefix()); perr != nil {
			err = invalidf("%s", perr) // the rule names the field
		}
	}
	var who string
	if err == nil {
		who, err = s.reader(ctx, "", "")
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.ListResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, r.GetPrefix()); err != nil {
			return
		}
		locks := m.Locks(r.GetPrefix(), r.GetPageToken(), n+1)
		if len(locks) > n {
			locks = locks[:n]
			out.NextPageToken = locks[n-1].GetName()
		}
		for _, l := range locks {
			sum := &batonpb.LockSummary{Name: l.GetName(), Waiters: uint32(len(l.GetWaiters())),
				Holders: uint32(len(l.GetHolders())), Limit: limitOf(l), DelayedUntil: tsOf(l.GetDelayedUntilUnixNano())}
			if len(l.GetHolders()) > 0 {
				sum.Holder = holderToWire(l.GetHolders()[0])
			}
			out.Locks = append(out.Locks, sum)
		}
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// ListSessions implements batonpb.BatonServer (linearizable), by id.
func (s *Server) ListSessions(ctx context.Context, r *batonpb.ListSessionsRequest) (*batonpb.ListSessionsResponse, error) {
	n, err := pageSize(r.GetPageSize())
	var who string
	if err == nil {
		who, err = s.reader(ctx, "", "")
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.ListSessionsResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, ""); err != nil { // sessions are no prefix's
			return
		}
		ss := m.Sessions(r.GetAfterId(), n+1)
		if len(ss) > n {
			ss = ss[:n]
			out.NextAfterId = ss[n-1].GetId()
		}
		for _, x := range ss {
			out.Sessions = append(out.Sessions, sessionToWire(x))
		}
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// Status implements batonpb.BatonServer. It is answered locally.
func (s *Server) Status(ctx context.Context, r *batonpb.StatusRequest) (*batonpb.StatusResponse, error) {
	// Any user may read it (a client learns the members and the leader
	// from it), but with authentication on only a user: it names every
	// member's addresses and counts the sessions and locks.
	if _, err := s.principal(ctx); err != nil {
		return nil, s.toStatus(err)
	}
	st := s.node.Status()
	out := &batonpb.StatusResponse{
		Name: s.cfg.Name, Id: st.ID, LeaderId: st.Leader, Term: st.Term,
		CommitIndex: st.Commit, AppliedIndex: st.Applied, Role: st.Role, Version: s.cfg.Version,
		LogVersion: s.node.LogVersion(),
	}
	s.diskStatus(out)
	if s.cfg.Members != nil {
		for _, m := range s.cfg.Members() {
			out.Members = append(out.Members, m.toProto())
			if m.ID == st.Leader {
				out.Leader, out.LeaderAddr = m.Name, m.ClientAddr
			}
		}
	}
	s.node.View(func(m *fsm.Machine) {
		out.Sessions, out.Locks = uint32(m.NumSessions()), uint32(m.NumLocks())
		out.ClusterId = m.ClusterID()
	})
	return out, nil
}
