package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/raftnode"
)

// maxLearnerLag is how far behind the leader's commit index a learner's
// log may be when it is promoted: a voter that is far behind would count
// in the majority without being able to help it yet.
const maxLearnerLag = 1000

// errMemberExists and errNoSuchMember are membership requests that name a
// member wrongly.
var (
	errMemberExists = errors.New("member already exists")
	errNoSuchMember = errors.New("no such member")
)

// checkMemberName: names become Raft ids and --initial-cluster entries.
func checkMemberName(name string) error {
	if err := rules.CheckMemberName(name); err != nil {
		return invalidf("%s", err) // the rule names the field
	}
	return nil
}

func checkPeerAddr(addr string) error {
	if err := rules.CheckPeerAddr(addr); err != nil {
		return invalidf("%s", err)
	}
	return nil
}

// memberID is the Raft id of a member name (Config.MemberID).
func (s *Server) memberID(name string) uint64 {
	if s.cfg.MemberID == nil {
		return 0
	}
	return s.cfg.MemberID(name)
}

// AddMember implements batonpb.BatonServer.
func (s *Server) AddMember(ctx context.Context, r *batonpb.AddMemberRequest) (*batonpb.AddMemberResponse, error) {
	who, err := s.memberAdmin(ctx, "AddMember")
	if err != nil {
		return nil, err
	}
	if err := checkMemberName(r.GetName()); err != nil {
		return nil, s.toStatus(err)
	}
	if err := checkPeerAddr(r.GetPeerAddr()); err != nil {
		return nil, s.toStatus(err)
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return nil, s.toStatus(err)
	}
	id := s.memberID(r.GetName())
	ms := s.node.Membership()
	if ms.Has(id) {
		return nil, s.toStatus(errMemberf(errMemberExists, "member %q is already in the cluster", r.GetName()))
	}
	for _, m := range ms.Members {
		if m.ID == id && m.Removed {
			// Its old data dir would be trusted as if it had never left,
			// and the others tell it, if it runs, that it was removed.
			return nil, s.toStatus(invalidf("member name %q was removed from this cluster and cannot come back: add the member under a new name", r.GetName()))
		}
	}
	for _, m := range s.members() {
		if m.PeerAddr == r.GetPeerAddr() {
			return nil, s.toStatus(invalidf("peer address %s is member %q's", r.GetPeerAddr(), m.Name))
		}
	}
	typ := raftpb.ConfChangeAddNode
	if r.GetLearner() {
		typ = raftpb.ConfChangeAddLearnerNode
	}
	cc := &raftpb.ConfChange{Type: &typ, NodeId: &id, Context: raftnode.MemberContext(r.GetName(), r.GetPeerAddr(), 0)}
	if err := s.node.ChangeMembership(ctx, cc); err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("member added", "name", r.GetName(), "peer_addr", r.GetPeerAddr(), "learner", r.GetLearner())
	kind := "a voter"
	if r.GetLearner() {
		kind = "a learner"
	}
	s.auditMembership(ctx, who, fmt.Sprintf("added member %q at %s as %s", r.GetName(), r.GetPeerAddr(), kind))
	out := &batonpb.AddMemberResponse{Members: s.wireMembers()}
	var parts []string
	for _, m := range out.Members {
		parts = append(parts, m.GetName()+"="+m.GetPeerAddr())
	}
	out.InitialCluster = strings.Join(parts, ",")
	return out, nil
}

// PromoteMember implements batonpb.BatonServer.
func (s *Server) PromoteMember(ctx context.Context, r *batonpb.PromoteMemberRequest) (*batonpb.PromoteMemberResponse, error) {
	who, err := s.memberAdmin(ctx, "PromoteMember")
	if err != nil {
		return nil, err
	}
	id, ms, err := s.existingMember(ctx, r.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	if !slices.Contains(ms.Learners, id) {
		return nil, s.toStatus(invalidf("member %q is a voter already", r.GetName()))
	}
	match, commit, ok, err := s.node.Progress(ctx, id)
	if err != nil {
		return nil, s.toStatus(err)
	}
	if !ok || match+maxLearnerLag < commit {
		return nil, s.toStatus(errMemberf(errNotCaughtUp, "learner %q has the log up to %d, the leader commits %d: promote it once it caught up", r.GetName(), match, commit))
	}
	typ := raftpb.ConfChangeAddNode
	if err := s.node.ChangeMembership(ctx, &raftpb.ConfChange{Type: &typ, NodeId: &id}); err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("member promoted", "name", r.GetName())
	s.auditMembership(ctx, who, fmt.Sprintf("promoted member %q to a voter", r.GetName()))
	return &batonpb.PromoteMemberResponse{Members: s.wireMembers()}, nil
}

// RemoveMember implements batonpb.BatonServer.
func (s *Server) RemoveMember(ctx context.Context, r *batonpb.RemoveMemberRequest) (*batonpb.RemoveMemberResponse, error) {
	who, err := s.memberAdmin(ctx, "RemoveMember")
	if err != nil {
		return nil, err
	}
	id, ms, err := s.existingMember(ctx, r.GetName())
	if err != nil {
		return nil, s.toStatus(err)
	}
	if len(ms.Voters) == 1 && ms.Voters[0] == id {
		return nil, s.toStatus(invalidf("member %q is the last voter", r.GetName()))
	}
	typ := raftpb.ConfChangeRemoveNode
	if err := s.node.ChangeMembership(ctx, &raftpb.ConfChange{Type: &typ, NodeId: &id}); err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("member removed", "name", r.GetName())
	s.auditMembership(ctx, who, fmt.Sprintf("removed member %q", r.GetName()))
	return &batonpb.RemoveMemberResponse{Members: s.wireMembers()}, nil
}

var errNotCaughtUp = errors.New("learner not caught up")

// memberAdmin refuses a membership change unless the caller may make it:
// an operator, or with authentication on, a user with admin over every
// name.
func (s *Server) memberAdmin(ctx context.Context, op string) (string, error) {
	who, err := s.operator(ctx, op)
	if err == nil && s.authView().enabled {
		s.node.View(func(m *fsm.Machine) { err = may(m, who, "", fsm.PermAdmin) })
	}
	return who, s.toStatus(err)
}

// auditMembership records a membership change that applied in the audit.
// The change is a Raft configuration change, not a command, so the note
// follows it in an entry of its own: a leader that fails between the two
// leaves the change unrecorded (the member's log line says it).
func (s *Server) auditMembership(ctx context.Context, who, action string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	note := &fsmpb.Command{Principal: who, Op: &fsmpb.Command_AuditNote{AuditNote: &fsmpb.AuditNote{Action: action}}}
	if _, err := s.propose(ctx, note); err != nil {
		s.log.Warn("membership change not recorded in the audit", "action", action, "err", err)
	}
}

// existingMember checks a request naming a current member, on the leader
// and up to date, and returns its id and the membership.
func (s *Server) existingMember(ctx context.Context, name string) (uint64, raftnode.Membership, error) {
	if err := checkMemberName(name); err != nil {
		return 0, raftnode.Membership{}, err
	}
	if err := s.node.ReadBarrier(ctx); err != nil {
		return 0, raftnode.Membership{}, err
	}
	id := s.memberID(name)
	ms := s.node.Membership()
	if !ms.Has(id) {
		return 0, ms, errMemberf(errNoSuchMember, "no member %q", name)
	}
	return id, ms, nil
}

// errMemberf is an error of kind (for the status code) that reads as the
// message alone.
func errMemberf(kind error, format string, args ...any) error {
	return &kindError{kind, fmt.Sprintf(format, args...)}
}

type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// members is Config.Members, or nothing.
func (s *Server) members() []Member {
	if s.cfg.Members == nil {
		return nil
	}
	return s.cfg.Members()
}

func (s *Server) wireMembers() []*batonpb.Member {
	var out []*batonpb.Member
	for _, m := range s.members() {
		out = append(out, m.toProto())
	}
	return out
}
