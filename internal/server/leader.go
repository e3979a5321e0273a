package server

import (
	"cmp"
	"context"
	"slices"

	"github.com/batonlock/baton/api/batonpb"
)

// TransferLeadership implements batonpb.BatonServer: this member, the
// leader, hands its office to the named voter (or the furthest along) and
// answers once that member leads. A follower answers NOT_LEADER, which
// sends the client on to the leader.
func (s *Server) TransferLeadership(ctx context.Context, r *batonpb.TransferLeadershipRequest) (*batonpb.TransferLeadershipResponse, error) {
	who, err := s.memberAdmin(ctx, "TransferLeadership")
	if err != nil {
		return nil, err
	}
	var to uint64
	if r.GetTo() != "" {
		id, ms, err := s.existingMember(ctx, r.GetTo())
		if err != nil {
			return nil, s.toStatus(err)
		}
		if slices.Contains(ms.Learners, id) {
			return nil, s.toStatus(invalidf("member %q is a learner: promote it before it can lead", r.GetTo()))
		}
		if id == s.node.Status().ID {
			return nil, s.toStatus(invalidf("member %q leads already", r.GetTo()))
		}
		to = id
	} else if err := s.node.ReadBarrier(ctx); err != nil {
		return nil, s.toStatus(err)
	}
	// Recorded while this member still leads; the log line below says
	// where leadership went.
	s.auditMembership(ctx, who, "leader transfer to "+cmp.Or(r.GetTo(), "the furthest along voter"))
	lead, err := s.node.TransferLeadership(ctx, to)
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.TransferLeadershipResponse{}
	for _, m := range s.members() {
		if m.ID == lead {
			out.Leader, out.LeaderAddr = m.Name, m.ClientAddr
		}
	}
	s.log.Info("leadership transferred", "by", who, "to", out.Leader)
	return out, nil
}
