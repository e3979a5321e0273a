package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/liveness"
)

// Keepalives and hold renewals: the requests that keep a session and a
// limited hold alive. They are not logged; the liveness tracker keeps the
// deadlines in the leader's memory (Config.Liveness). Both are served
// unary (KeepAlive, RenewHold: HTTP and the CLI) and on a session's
// channel (channelKeepAlive, channelRenewHold), by the same functions.

// KeepAlive implements batonpb.BatonServer.
func (s *Server) KeepAlive(ctx context.Context, r *batonpb.KeepAliveRequest) (*batonpb.KeepAliveResponse, error) {
	resp, err := s.keepAlive(ctx, r.GetSessionId(), hashSecret(r.GetSecret()))
	return resp, s.toStatus(err)
}

// keepAlive extends a session. The deadline counts from the moment the
// request arrived, and the answer waits for a ReadIndex round that proves
// this node still leads after that moment (see docs/ARCHITECTURE.md):
// only then can the client's own deadline, counted from when it sent the
// request, be safely earlier than the server's. shown is the hash of the
// secret the request showed.
func (s *Server) keepAlive(ctx context.Context, id uint64, shown []byte) (*batonpb.KeepAliveResponse, error) {
	received := time.Now()
	if id == 0 {
		return nil, invalidf("session_id is required")
	}
	if _, err := s.principal(ctx); err != nil {
		return nil, err
	}
	if err := s.admitKeepAlive(id, shown, received); err != nil {
		if errors.Is(err, errKeepAliveRate) {
			return nil, err
		}
		return nil, s.leaderOr(err)
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	ttl, err := s.tracker.Heartbeat(id, received)
	if err != nil {
		return nil, s.leaderOr(err)
	}
	return &batonpb.KeepAliveResponse{SessionId: id, Ttl: durationpb.New(ttl)}, nil
}

// admitKeepAlive checks that session id lives and that a keepalive
// received then is within its rate: the tracker keeps the rate with the
// session's deadline, in the leader's memory only.
func (s *Server) admitKeepAlive(id uint64, shown []byte, received time.Time) error {
	rate := s.cfg.Limits.MaxKeepAliveRate
	err := s.tracker.Admit(id, shown, received, rate)
	if errors.Is(err, liveness.ErrTooFast) {
		s.keepAlivesRefused.Add(1)
		return fmt.Errorf("%w: session %d sent more than %d keepalives a second (--max-keepalive-rate); one every third of its TTL keeps it",
			errKeepAliveRate, id, rate)
	}
	return err
}

// RenewHold implements batonpb.BatonServer.
func (s *Server) RenewHold(ctx context.Context, r *batonpb.RenewHoldRequest) (*batonpb.RenewHoldResponse, error) {
	resp, err := s.renewHold(ctx, r.GetSessionId(), hashSecret(r.GetSecret()), r)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return resp, nil
}

// renewHold is keepAlive for one limited hold: the limit restarts from when
// the renewal arrived, once a ReadIndex round that began after it confirmed
// that this member still leads (a new leader restarts every limit from its
// election, which is later).
func (s *Server) renewHold(ctx context.Context, session uint64, shown []byte, r *batonpb.RenewHoldRequest) (*batonpb.RenewHoldResponse, error) {
	received := time.Now()
	if session == 0 {
		return nil, invalidf("session_id is required")
	}
	if err := checkRenewHold(r); err != nil {
		return nil, err
	}
	if _, err := s.principal(ctx); err != nil {
		return nil, err
	}
	if err := s.tracker.CheckHold(r.GetName(), session, r.GetToken(), shown); err != nil {
		return nil, s.leaderOr(err)
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	limit, err := s.tracker.RenewHold(r.GetName(), session, r.GetToken(), received)
	if err != nil {
		return nil, s.leaderOr(err)
	}
	return &batonpb.RenewHoldResponse{HoldLimit: durationpb.New(limit)}, nil
}

// leaderOr prefers the node's not-leader error (with its leader hint)
// over the tracker's view when this node does not lead.
func (s *Server) leaderOr(err error) error {
	if !s.node.IsLeader() {
		return s.node.ReadBarrier(context.Background())
	}
	return err
}

// channelKeepAlive answers a keepalive on ch from a goroutine of its own:
// it waits for a ReadIndex round. It ends with the channel; what it sends
// after the end is dropped.
func (s *Server) channelKeepAlive(ch *channel, req *batonpb.SessionRequest) {
	ka, err := s.keepAlive(ch.ctx, ch.session, ch.secret.Bytes())
	s.answer(ch, req, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_KeepAlive{KeepAlive: ka}}, err, false)
}

// channelRenewHold is channelKeepAlive for a renewal of one limited hold.
func (s *Server) channelRenewHold(ch *channel, req *batonpb.SessionRequest, r *batonpb.RenewHoldRequest) {
	rh, err := s.renewHold(ch.ctx, ch.session, ch.secret.Bytes(), r)
	s.answer(ch, req, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_RenewHold{RenewHold: rh}}, err, false)
}
