package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Authentication and authorization. The API authenticates a request (a
// client certificate's common name, or a bearer token's user) and stamps
// the user's name on its command (Command.principal); the state machine
// decides whether that user may do it, from the replicated AuthState, so
// every member decides alike and a change applies from its entry on.
// While authentication is off, every command is allowed and users, roles
// and permissions are only being prepared.

// Perm is a set of permissions over a lock-name prefix.
type Perm uint32

const (
	// PermRead: get, list, check and watch the locks under the prefix
	// (and, over every name, list sessions and read the audit).
	PermRead Perm = 1 << iota
	// PermLock: open sessions and take locks under the prefix.
	PermLock
	// PermAdmin: end others' holds under the prefix (CasRelease); over
	// every name (the prefix ""), blacklist sessions, change membership,
	// rotate the signing key and change users, roles and permissions.
	PermAdmin

	// PermAll is every permission.
	PermAll = PermRead | PermLock | PermAdmin
)

// RootRole is the built-in role with every permission over every name.
// It cannot be changed or deleted; enabling authentication needs a user
// that has it, and the last such user cannot lose it while it is on.
const RootRole = "root"

// Limits of the auth state: it lives in every snapshot and is scanned on
// every authorized command.
const (
	MaxUsers           = 10000
	MaxRoles           = 1000
	MaxRolesPerUser    = 64
	MaxPermsPerRole    = 256
	MaxAuditRecords    = 1000
	permBits           = uint32(PermAll)
	auditActionMaxSize = 512
)

type user struct {
	name      string
	tokenHash SecretHash
	roles     []string // sorted
}

type role struct {
	name  string
	perms []*fsmpb.Permission // sorted by prefix
}

type authState struct {
	enabled bool
	users   map[string]*user
	roles   map[string]*role
	tokens  map[SecretHash]string // token hash -> user
}

type auditRecord struct {
	index     uint64
	wall      int64
	principal string
	action    string
}

// String names the permissions of p, e.g. "read,lock".
func (p Perm) String() string {
	var names []string
	for _, x := range []struct {
		p    Perm
		name string
	}{{PermRead, "read"}, {PermLock, "lock"}, {PermAdmin, "admin"}} {
		if p&x.p != 0 {
			names = append(names, x.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ParsePerm reads "read,lock,admin" (any of them, comma-separated) or
// "all".
func ParsePerm(s string) (Perm, error) {
	if s == "all" {
		return PermAll, nil
	}
	var p Perm
	for f := range strings.SplitSeq(s, ",") {
		switch strings.TrimSpace(f) {
		case "read":
			p |= PermRead
		case "lock":
			p |= PermLock
		case "admin":
			p |= PermAdmin
		default:
			return 0, fmt.Errorf("permission %q: want read, lock, admin (comma-separated) or all", f)
		}
	}
	return p, nil
}

// AuthEnabled reports whether authentication is on.
func (m *Machine) AuthEnabled() bool { return m.auth.enabled }

// UserOfToken returns the user whose bearer token hashes to h.
func (m *Machine) UserOfToken(h SecretHash) (string, bool) {
	name, ok := m.auth.tokens[h]
	return name, ok
}

// UserTokens returns a copy of the bearer tokens' hashes, each with its
// user.
func (m *Machine) UserTokens() map[SecretHash]string { return maps.Clone(m.auth.tokens) }

// UserHasToken reports whether the user may show a bearer token.
func (m *Machine) UserHasToken(name string) bool {
	u := m.auth.users[name]
	return u != nil && u.tokenHash.IsSet()
}

// Allowed reports whether principal has p over name (with name a prefix
// itself: a grant over "jobs/" covers "jobs/42" and the prefix "jobs/x").
// While authentication is off everything is allowed.
func (m *Machine) Allowed(principal, name string, p Perm) bool {
	return m.permits(principal, p, func(prefix string) bool { return strings.HasPrefix(name, prefix) })
}

// AllowedSomewhere reports whether principal has p over some prefix
// (everything while authentication is off).
func (m *Machine) AllowedSomewhere(principal string, p Perm) bool {
	return m.allowedSomewhere(principal, p)
}

// allowedSomewhere reports whether principal has p over some prefix.
func (m *Machine) allowedSomewhere(principal string, p Perm) bool {
	return m.permits(principal, p, func(string) bool { return true })
}

// permits reports whether one of principal's roles grants p over a
// prefix for which covers is true.
func (m *Machine) permits(principal string, p Perm, covers func(prefix string) bool) bool {
	if !m.auth.enabled {
		return true
	}
	u := m.auth.users[principal]
	if u == nil {
		return false
	}
	for _, r := range u.roles {
		if r == RootRole {
			return true
		}
		if ro := m.auth.roles[r]; ro != nil {
			for _, g := range ro.perms {
				if Perm(g.GetPerms())&p == p && covers(g.GetPrefix()) {
					return true
				}
			}
		}
	}
	return false
}

// authorize refuses cmd when authentication is on and its principal may
// not make it; s is the command's session, if it names one. The leader's
// own commands (expiries, timeouts, log versions) are not a principal's.
func (m *Machine) authorize(cmd *fsmpb.Command, s *session) *Error {
	if !m.auth.enabled {
		return nil
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_ExpireSession, *fsmpb.Command_ExpireHold, *fsmpb.Command_EndLockDelay, *fsmpb.Command_SetLogVersion,
		*fsmpb.Command_EndRevokedHold:
		return nil
	case *fsmpb.Command_CancelWait:
		if cmd.GetSessionId() == 0 {
			return nil // a timeout, or a server cleaning up for a caller that left
		}
	case *fsmpb.Command_RotateSigningKey:
		if op.RotateSigningKey.GetFirst() {
			return nil // the leader's, while the cluster has no key
		}
	default:
		_ = op
	}
	who := cmd.GetPrincipal()
	if m.auth.users[who] == nil {
		if who == "" {
			return errorf(fsmpb.Error_ERROR_NOT_PERMITTED, "authentication is on and the request names no user")
		}
		return errorf(fsmpb.Error_ERROR_NOT_PERMITTED, "user %q does not exist", who)
	}
	if s != nil && s.principal != "" && s.principal != who {
		return errorf(fsmpb.Error_ERROR_NOT_PERMITTED, "session %d belongs to user %q, not %q", s.id, s.principal, who)
	}
	need := func(name string, p Perm) *Error {
		if m.Allowed(who, name, p) {
			return nil
		}
		return errorf(fsmpb.Error_ERROR_NOT_PERMITTED, "user %q has no %s permission over %s", who, p, quote(name))
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_OpenSession:
		if !m.allowedSomewhere(who, PermLock) {
			return errorf(fsmpb.Error_ERROR_NOT_PERMITTED, "user %q has no lock permission anywhere, so no use for a session", who)
		}
	case *fsmpb.Command_Acquire:
		return need(op.Acquire.GetLock(), PermLock)
	case *fsmpb.Command_Proclaim:
		return need(op.Proclaim.GetLock(), PermLock)
	case *fsmpb.Command_AcquireMany:
		for _, l := range op.AcquireMany.GetLocks() {
			if err := need(l, PermLock); err != nil {
				return err
			}
		}
	case *fsmpb.Command_CasRelease:
		return need(op.CasRelease.GetLock(), PermAdmin)
	case *fsmpb.Command_RevokeHold:
		return need(op.RevokeHold.GetLock(), PermAdmin)
	case *fsmpb.Command_BlacklistSession, *fsmpb.Command_AuthChange, *fsmpb.Command_AuditNote, *fsmpb.Command_RotateSigningKey:
		return need("", PermAdmin)
	}
	return nil
}

// applyAuthChange applies op, made by principal.
func (m *Machine) applyAuthChange(a *apply, principal string, op *fsmpb.AuthChange) {
	if err := m.changeAuth(op); err != nil {
		a.refuse(err)
		return
	}
	m.audit(a, principal, describeAuthChange(op))
}

func (m *Machine) changeAuth(op *fsmpb.AuthChange) *Error {
	st := &m.auth
	if st.users == nil {
		st.users, st.roles, st.tokens = map[string]*user{}, map[string]*role{}, map[SecretHash]string{}
	}
	userName, roleName := op.GetUser(), op.GetRole()
	needUser := func() (*user, *Error) {
		if u := st.users[userName]; u != nil {
			return u, nil
		}
		return nil, errorf(fsmpb.Error_ERROR_INVALID_ARGUMENT, "user %q does not exist", userName)
	}
	needRole := func(changing bool) *Error {
		if roleName == RootRole {
			if changing {
				return invalid("the role root is built in: it has every permission over every name and cannot change")
			}
			return nil
		}
		if st.roles[roleName] == nil {
			return errorf(fsmpb.Error_ERROR_INVALID_ARGUMENT, "role %q does not exist", roleName)
		}
		return nil
	}
	switch op.GetKind() {
	case fsmpb.AuthChange_ENABLE:
		if m.rootUsers() == 0 {
			return invalid("no user has the role root: add one (and keep its token or certificate) before enabling authentication")
		}
		st.enabled = true
	case fsmpb.AuthChange_DISABLE:
		st.enabled = false
	case fsmpb.AuthChange_ADD_USER:
		if err := checkAuthName("user", userName); err != nil {
			return err
		}
		h, ok := ParseSecretHash(op.GetTokenHash())
		switch {
		case st.users[userName] != nil:
			return invalid("user %q exists", userName)
		case len(st.users) >= MaxUsers:
			return errorf(fsmpb.Error_ERROR_INVALID_ARGUMENT, "there are %d users; the limit is %d", len(st.users), MaxUsers)
		case !ok:
			return invalid("token_hash is %d bytes; want a SHA-256 or none", len(op.GetTokenHash()))
		}
		if h.IsSet() {
			if _, used := st.tokens[h]; used {
				return invalid("that token is another user's")
			}
			st.tokens[h] = userName
		}
		st.users[userName] = &user{name: userName, tokenHash: h}
	case fsmpb.AuthChange_DELETE_USER:
		u, err := needUser()
		if err != nil {
			return err
		}
		if st.enabled && slices.Contains(u.roles, RootRole) && m.rootUsers() == 1 {
			return invalid("user %q is the last with the role root while authentication is on", userName)
		}
		delete(st.users, userName)
		if u.tokenHash.IsSet() {
			delete(st.tokens, u.tokenHash)
		}
	case fsmpb.AuthChange_GRANT_ROLE:
		u, err := needUser()
		if err == nil {
			err = needRole(false)
		}
		if err != nil {
			return err
		}
		if i, found := slices.BinarySearch(u.roles, roleName); !found {
			if len(u.roles) >= MaxRolesPerUser {
				return invalid("user %q has %d roles; the limit is %d", userName, len(u.roles), MaxRolesPerUser)
			}
			u.roles = slices.Insert(u.roles, i, roleName)
		}
	case fsmpb.AuthChange_REVOKE_ROLE:
		u, err := needUser()
		if err != nil {
			return err
		}
		i, found := slices.BinarySearch(u.roles, roleName)
		if !found {
			return invalid("user %q does not have the role %q", userName, roleName)
		}
		if st.enabled && roleName == RootRole && m.rootUsers() == 1 {
			return invalid("user %q is the last with the role root while authentication is on", userName)
		}
		u.roles = slices.Delete(u.roles, i, i+1)
	case fsmpb.AuthChange_ADD_ROLE:
		if err := checkAuthName("role", roleName); err != nil {
			return err
		}
		switch {
		case roleName == RootRole || st.roles[roleName] != nil:
			return invalid("role %q exists", roleName)
		case len(st.roles) >= MaxRoles:
			return invalid("there are %d roles; the limit is %d", len(st.roles), MaxRoles)
		}
		st.roles[roleName] = &role{name: roleName}
	case fsmpb.AuthChange_DELETE_ROLE:
		if err := needRole(true); err != nil {
			return err
		}
		for _, u := range st.users {
			if slices.Contains(u.roles, roleName) {
				return invalid("user %q has the role %q: revoke it first", u.name, roleName)
			}
		}
		delete(st.roles, roleName)
	case fsmpb.AuthChange_GRANT, fsmpb.AuthChange_REVOKE:
		if err := needRole(true); err != nil {
			return err
		}
		prefix := op.GetPrefix()
		if prefix != "" {
			if err := ValidateLockName(prefix); err != nil {
				return invalid("prefix: %s", err.(*Error).Msg)
			}
		}
		r := st.roles[roleName]
		i, found := slices.BinarySearchFunc(r.perms, prefix, func(p *fsmpb.Permission, prefix string) int {
			return cmp.Compare(p.GetPrefix(), prefix)
		})
		if op.GetKind() == fsmpb.AuthChange_REVOKE {
			if !found {
				return invalid("role %q has no permission over %s", roleName, quote(prefix))
			}
			r.perms = slices.Delete(r.perms, i, i+1)
			return nil
		}
		perms := op.GetPerms()
		if perms == 0 || perms&^permBits != 0 {
			return invalid("perms is %d: want a non-empty set of read (1), lock (2) and admin (4)", perms)
		}
		if found {
			r.perms[i] = &fsmpb.Permission{Prefix: prefix, Perms: perms}
			return nil
		}
		if len(r.perms) >= MaxPermsPerRole {
			return invalid("role %q has %d permissions; the limit is %d", roleName, len(r.perms), MaxPermsPerRole)
		}
		r.perms = slices.Insert(r.perms, i, &fsmpb.Permission{Prefix: prefix, Perms: perms})
	default:
		return invalid("unknown auth change %v", op.GetKind())
	}
	return nil
}

func (m *Machine) rootUsers() int {
	n := 0
	for _, u := range m.auth.users {
		if slices.Contains(u.roles, RootRole) {
			n++
		}
	}
	return n
}

func checkAuthName(what, name string) *Error { return refusal(rules.CheckAuthName(what, name)) }

func describeAuthChange(op *fsmpb.AuthChange) string {
	switch op.GetKind() {
	case fsmpb.AuthChange_ENABLE:
		return "enabled authentication"
	case fsmpb.AuthChange_DISABLE:
		return "disabled authentication"
	case fsmpb.AuthChange_ADD_USER:
		how := "certificate only"
		if len(op.GetTokenHash()) > 0 {
			how = "with a token"
		}
		return fmt.Sprintf("added user %q (%s)", op.GetUser(), how)
	case fsmpb.AuthChange_DELETE_USER:
		return fmt.Sprintf("deleted user %q", op.GetUser())
	case fsmpb.AuthChange_GRANT_ROLE:
		return fmt.Sprintf("gave user %q the role %q", op.GetUser(), op.GetRole())
	case fsmpb.AuthChange_REVOKE_ROLE:
		return fmt.Sprintf("took the role %q from user %q", op.GetRole(), op.GetUser())
	case fsmpb.AuthChange_ADD_ROLE:
		return fmt.Sprintf("added role %q", op.GetRole())
	case fsmpb.AuthChange_DELETE_ROLE:
		return fmt.Sprintf("deleted role %q", op.GetRole())
	case fsmpb.AuthChange_GRANT:
		return fmt.Sprintf("gave role %q %s over %s", op.GetRole(), Perm(op.GetPerms()), quote(op.GetPrefix()))
	case fsmpb.AuthChange_REVOKE:
		return fmt.Sprintf("took role %q's permissions over %s", op.GetRole(), quote(op.GetPrefix()))
	}
	return op.GetKind().String()
}

// audit records an admin or auth action that took effect.
func (m *Machine) audit(a *apply, principal, action string) {
	if len(action) > auditActionMaxSize {
		action = action[:auditActionMaxSize]
	}
	if len(m.audits) >= MaxAuditRecords {
		m.audits = slices.Delete(m.audits, 0, len(m.audits)-MaxAuditRecords+1)
	}
	m.audits = append(m.audits, auditRecord{index: a.index, wall: a.wall, principal: principal, action: action})
}

// AuditRecords returns the recorded admin and auth actions, oldest first.
func (m *Machine) AuditRecords() []*fsmpb.AuditRecord {
	out := make([]*fsmpb.AuditRecord, 0, len(m.audits))
	for _, r := range m.audits {
		out = append(out, &fsmpb.AuditRecord{Index: r.index, WallUnixNano: r.wall, Principal: r.principal, Action: r.action})
	}
	return out
}

// AuthState returns the users, roles and permissions (token hashes
// left out), sorted by name.
func (m *Machine) AuthState() *fsmpb.AuthState {
	st := m.authProto()
	for _, u := range st.Users {
		u.TokenHash = nil
	}
	return st
}

// authProto is the auth state as the snapshot keeps it.
func (m *Machine) authProto() *fsmpb.AuthState {
	st := &fsmpb.AuthState{Enabled: m.auth.enabled}
	for _, u := range m.auth.users {
		st.Users = append(st.Users, &fsmpb.User{Name: u.name, TokenHash: u.tokenHash.Bytes(), Roles: slices.Clone(u.roles)})
	}
	slices.SortFunc(st.Users, func(x, y *fsmpb.User) int { return cmp.Compare(x.GetName(), y.GetName()) })
	for _, r := range m.auth.roles {
		ro := &fsmpb.Role{Name: r.name}
		for _, p := range r.perms {
			ro.Permissions = append(ro.Permissions, &fsmpb.Permission{Prefix: p.GetPrefix(), Perms: p.GetPerms()})
		}
		st.Roles = append(st.Roles, ro)
	}
	slices.SortFunc(st.Roles, func(x, y *fsmpb.Role) int { return cmp.Compare(x.GetName(), y.GetName()) })
	return st
}

// encodeAuth is the snapshot's auth and audit fields: nothing for a
// cluster that never used them, so older snapshots encode as before.
func (m *Machine) encodeAuth() []byte {
	var b []byte
	if m.auth.enabled || len(m.auth.users) > 0 || len(m.auth.roles) > 0 {
		rec, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m.authProto())
		b = protofield.AppendPresentBytes(b, snapshotAuth, rec)
	}
	for _, r := range m.audits {
		rec, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&fsmpb.AuditRecord{
			Index: r.index, WallUnixNano: r.wall, Principal: r.principal, Action: r.action})
		b = protofield.AppendPresentBytes(b, snapshotAudit, rec)
	}
	return b
}

// loadAuthRecords restores the snapshot's auth state and audit records.
func (m *Machine) loadAuthRecords(data []byte) error {
	var (
		auth   fsmpb.AuthState
		audits []*fsmpb.AuditRecord
	)
	err := eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		switch num {
		case snapshotAuth: // a message given twice merges, as proto does
			opts := proto.UnmarshalOptions{Merge: true}
			if err := opts.Unmarshal(rec, &auth); err != nil {
				return &decodeError{err}
			}
		case snapshotAudit:
			r := &fsmpb.AuditRecord{}
			if err := decodeRecord(rec, r); err != nil {
				return err
			}
			audits = append(audits, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := m.loadAuth(&auth); err != nil {
		return err
	}
	return m.loadAudit(audits)
}

// loadAuth restores the auth state of a snapshot.
func (m *Machine) loadAuth(st *fsmpb.AuthState) error {
	m.auth = authState{}
	for _, r := range st.GetRoles() {
		op := &fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_ROLE, Role: r.GetName()}
		if err := m.changeAuth(op); err != nil {
			return fmt.Errorf("role %q: %s", r.GetName(), err.Msg)
		}
		for _, p := range r.GetPermissions() {
			op := &fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT, Role: r.GetName(), Prefix: p.GetPrefix(), Perms: p.GetPerms()}
			if err := m.changeAuth(op); err != nil {
				return fmt.Errorf("role %q: %s", r.GetName(), err.Msg)
			}
		}
	}
	for _, u := range st.GetUsers() {
		if err := m.changeAuth(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_USER, User: u.GetName(), TokenHash: u.GetTokenHash()}); err != nil {
			return fmt.Errorf("user %q: %s", u.GetName(), err.Msg)
		}
		for _, r := range u.GetRoles() {
			if err := m.changeAuth(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT_ROLE, User: u.GetName(), Role: r}); err != nil {
				return fmt.Errorf("user %q: %s", u.GetName(), err.Msg)
			}
		}
	}
	if st.GetEnabled() {
		if err := m.changeAuth(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_ENABLE}); err != nil {
			return fmt.Errorf("auth: %s", err.Msg)
		}
	}
	return nil
}

// loadAudit restores the audit records of a snapshot, oldest first.
func (m *Machine) loadAudit(rs []*fsmpb.AuditRecord) error {
	if len(rs) > MaxAuditRecords {
		return fmt.Errorf("%d audit records; the limit is %d", len(rs), MaxAuditRecords)
	}
	m.audits = nil
	for i, r := range rs {
		if r.GetIndex() == 0 || r.GetIndex() > m.applied || i > 0 && r.GetIndex() <= rs[i-1].GetIndex() {
			return fmt.Errorf("audit record %d has index %d: indexes ascend, at most the applied index %d", i, r.GetIndex(), m.applied)
		}
		m.audits = append(m.audits, auditRecord{index: r.GetIndex(), wall: r.GetWallUnixNano(), principal: r.GetPrincipal(), action: r.GetAction()})
	}
	return nil
}
