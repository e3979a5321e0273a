package server

import (
	"context"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// proclaimCommand validates a Proclaim (a holder setting its hold's
// value: an election's leader publishing its address) and returns its
// command. Whether the session holds the lock with that token is the
// state machine's to decide.
func proclaimCommand(r *batonpb.ProclaimRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	if r.GetToken() == 0 {
		return nil, invalidf("token is required: a proclaim names the hold whose value it sets")
	}
	if err := checkOwnerKey(r.GetOwnerKey()); err != nil {
		return nil, err
	}
	if err := invalidField("value", rules.CheckHoldValue(r.GetValue())); err != nil {
		return nil, err
	}
	return stamp(r.GetHeader(), &fsmpb.Command{Op: &fsmpb.Command_Proclaim{Proclaim: &fsmpb.Proclaim{
		Lock: r.GetName(), Token: r.GetToken(), OwnerKey: r.GetOwnerKey(), Value: r.GetValue(),
	}}}), nil
}

// Proclaim implements batonpb.BatonServer.
func (s *Server) Proclaim(ctx context.Context, r *batonpb.ProclaimRequest) (*batonpb.ProclaimResponse, error) {
	cmd, err := proclaimCommand(r)
	if err == nil {
		err = s.asCaller(ctx, cmd, r.GetHeader().GetSecret())
	}
	if err == nil {
		_, err = s.propose(ctx, cmd)
	}
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &batonpb.ProclaimResponse{}, nil
}
