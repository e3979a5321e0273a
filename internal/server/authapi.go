package server

import (
	"context"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// ChangeAuth implements batonpb.BatonServer: one change of users, roles
// or permissions, decided by the state machine (admin over every name
// while authentication is on) and recorded in the audit.
func (s *Server) ChangeAuth(ctx context.Context, r *batonpb.ChangeAuthRequest) (*batonpb.ChangeAuthResponse, error) {
	resp, err := s.changeAuth(ctx, r)
	return resp, s.toStatus(err)
}

func (s *Server) changeAuth(ctx context.Context, r *batonpb.ChangeAuthRequest) (*batonpb.ChangeAuthResponse, error) {
	// While authentication is off, an operator call (Config.Operators).
	who, err := s.operator(ctx, "ChangeAuth")
	if err != nil {
		return nil, err
	}
	cmd, token, err := authChangeCommand(r)
	if err != nil {
		return nil, err
	}
	cmd.Principal = who
	if _, err := s.propose(ctx, cmd); err != nil {
		return nil, err
	}
	s.log.Info("auth changed", "by", who, "change", cmd.GetAuthChange().GetKind().String(), "user", r.GetUser(), "role", r.GetRole(), "prefix", r.GetPrefix())
	return &batonpb.ChangeAuthResponse{Token: token}, nil
}

// authChangeCommand validates a ChangeAuth and returns its command,
// without its principal, and the new user's bearer token when it asked
// for one (only its hash is in the command). It checks the names and
// prefix the change uses by package rules, as the state machine does;
// whether they exist is the state machine's to say.
func authChangeCommand(r *batonpb.ChangeAuthRequest) (*fsmpb.Command, string, error) {
	kind := fsmpb.AuthChange_Kind(r.GetKind())
	if _, known := fsmpb.AuthChange_Kind_name[int32(kind)]; !known || kind == fsmpb.AuthChange_KIND_UNSPECIFIED {
		return nil, "", invalidf("kind %d is not an auth change", r.GetKind())
	}
	op := &fsmpb.AuthChange{Kind: kind, User: r.GetUser(), Role: r.GetRole(), Prefix: r.GetPrefix()}
	switch kind {
	case fsmpb.AuthChange_ADD_USER, fsmpb.AuthChange_DELETE_USER, fsmpb.AuthChange_GRANT_ROLE, fsmpb.AuthChange_REVOKE_ROLE:
		if r.GetUser() == "" {
			return nil, "", invalidf("user is required")
		}
		if err := rules.CheckAuthName("user", r.GetUser()); err != nil {
			return nil, "", invalidf("%s", err) // the rule names the field
		}
	}
	switch kind {
	case fsmpb.AuthChange_GRANT_ROLE, fsmpb.AuthChange_REVOKE_ROLE, fsmpb.AuthChange_ADD_ROLE,
		fsmpb.AuthChange_DELETE_ROLE, fsmpb.AuthChange_GRANT, fsmpb.AuthChange_REVOKE:
		if r.GetRole() == "" {
			return nil, "", invalidf("role is required")
		}
		if err := rules.CheckAuthName("role", r.GetRole()); err != nil {
			return nil, "", invalidf("%s", err)
		}
	}
	if (kind == fsmpb.AuthChange_GRANT || kind == fsmpb.AuthChange_REVOKE) && r.GetPrefix() != "" {
		// "" is every name; any other prefix is a lock name or the start
		// of one, as the state machine has it.
		if err := invalidField("prefix", rules.CheckLockName(r.GetPrefix())); err != nil {
			return nil, "", err
		}
	}
	if kind == fsmpb.AuthChange_GRANT {
		p, err := fsm.ParsePerm(r.GetPerms())
		if err != nil {
			return nil, "", invalidf("perms: %v", err)
		}
		op.Perms = uint32(p)
	}
	var token string
	if kind == fsmpb.AuthChange_ADD_USER && r.GetWithToken() {
		token = NewSecret()
		op.TokenHash = hashSecret(token)
	}
	return &fsmpb.Command{Op: &fsmpb.Command_AuthChange{AuthChange: op}}, token, nil
}

// GetAuth implements batonpb.BatonServer (linearizable).
func (s *Server) GetAuth(ctx context.Context, _ *batonpb.GetAuthRequest) (*batonpb.GetAuthResponse, error) {
	who, err := s.reader(ctx, "", "")
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.GetAuthResponse{You: who}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, ""); err != nil {
			return
		}
		st := m.AuthState()
		out.Enabled = st.GetEnabled()
		for _, u := range st.GetUsers() {
			out.Users = append(out.Users, &batonpb.AuthUser{Name: u.GetName(), Roles: u.GetRoles(), HasToken: m.UserHasToken(u.GetName())})
		}
		for _, r := range st.GetRoles() {
			ar := &batonpb.AuthRole{Name: r.GetName()}
			for _, p := range r.GetPermissions() {
				ar.Permissions = append(ar.Permissions, &batonpb.AuthPermission{Prefix: p.GetPrefix(), Perms: fsm.Perm(p.GetPerms()).String()})
			}
			out.Roles = append(out.Roles, ar)
		}
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}

// Audit implements batonpb.BatonServer (linearizable).
func (s *Server) Audit(ctx context.Context, _ *batonpb.AuditRequest) (*batonpb.AuditResponse, error) {
	who, err := s.reader(ctx, "", "")
	if err != nil {
		return nil, s.toStatus(err)
	}
	out := &batonpb.AuditResponse{}
	s.node.View(func(m *fsm.Machine) {
		if err = mayRead(m, who, ""); err != nil {
			return
		}
		for _, r := range m.AuditRecords() {
			out.Entries = append(out.Entries, &batonpb.AuditEntry{Index: r.GetIndex(), Time: tsOf(r.GetWallUnixNano()),
				Principal: r.GetPrincipal(), Action: r.GetAction()})
		}
	})
	if err != nil {
		return nil, s.toStatus(err)
	}
	return out, nil
}
