package baton

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// Authentication. With authentication on in the cluster (`baton auth
// enable`), every call shows who makes it: a client certificate whose
// common name is a user's (WithTLS), or a user's bearer token
// (WithToken). Each user has roles; each role permissions (read, lock,
// admin) over lock-name prefixes. A call its user may not make fails with
// an error matching ErrPermissionDenied that names the permission and the
// prefix; one without a credential the cluster knows, with
// ErrUnauthenticated.

// WithToken makes every call show token as its bearer token ("authorization:
// Bearer TOKEN"). Over a connection without TLS the token travels in
// plaintext: use it with WithTLS except on loopback.
func WithToken(token string) Option {
	return func(c *clientConfig) {
		c.dialOpts = append(c.dialOpts, grpc.WithPerRPCCredentials(bearer(token)))
		c.token = token
	}
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// AuthUser is a user as GetAuth lists it.
type AuthUser struct {
	Name     string
	Roles    []string
	HasToken bool
}

// AuthRole is a role and its permissions, prefix -> "read,lock,admin".
type AuthRole struct {
	Name        string
	Permissions []AuthPermission
}

// AuthPermission is a role's permissions over the lock names that start
// with Prefix ("" is every name).
type AuthPermission struct {
	Prefix string
	Perms  string
}

// AuthState is who may do what in the cluster.
type AuthState struct {
	Enabled bool
	Users   []AuthUser
	Roles   []AuthRole
	// You is the user this client authenticated as ("" when
	// authentication is off).
	You string
}

// AuditEntry is one admin or auth action that took effect.
type AuditEntry struct {
	Index     uint64
	Time      time.Time
	Principal string
	Action    string
}

// changeAuth makes one change; it is retried only when it surely did not
// apply (a retried ADD_USER could otherwise meet the user it made). The
// names it carries are checked first, with the server's rules.
func (c *Client) changeAuth(ctx context.Context, r *batonpb.ChangeAuthRequest) (*batonpb.ChangeAuthResponse, error) {
	if r.GetUser() != "" || r.GetKind() == batonpb.ChangeAuthRequest_ADD_USER {
		if err := invalid(rules.CheckAuthName("user", r.GetUser())); err != nil {
			return nil, err
		}
	}
	if r.GetRole() != "" {
		if err := invalid(rules.CheckAuthName("role", r.GetRole())); err != nil {
			return nil, err
		}
	}
	if err := invalid(rules.CheckPrefix(r.GetPrefix())); err != nil {
		return nil, err
	}
	var out *batonpb.ChangeAuthResponse
	err := c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		out, err = bc.ChangeAuth(ctx, r)
		return err
	})
	return out, err
}

// EnableAuth turns authentication on; the cluster must have a user with
// the role root (AddUser, GrantRole), whose token or certificate the
// caller keeps.
func (c *Client) EnableAuth(ctx context.Context) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ENABLE})
	return err
}

// DisableAuth turns authentication off: every client may do everything.
func (c *Client) DisableAuth(ctx context.Context) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_DISABLE})
	return err
}

// AddUser adds a user. With withToken the cluster draws its bearer token
// and returns it this once (only its hash is kept); without, the user
// authenticates with a client certificate whose common name is name.
func (c *Client) AddUser(ctx context.Context, name string, withToken bool) (token string, err error) {
	out, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_USER, User: name, WithToken: withToken})
	return out.GetToken(), err
}

// DeleteUser deletes a user; its sessions can no longer be used.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_DELETE_USER, User: name})
	return err
}

// GrantRole gives user the role ("root": every permission over every
// name).
func (c *Client) GrantRole(ctx context.Context, user, role string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT_ROLE, User: user, Role: role})
	return err
}

// RevokeRole takes the role from user.
func (c *Client) RevokeRole(ctx context.Context, user, role string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_REVOKE_ROLE, User: user, Role: role})
	return err
}

// AddRole adds a role without permissions.
func (c *Client) AddRole(ctx context.Context, role string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_ROLE, Role: role})
	return err
}

// DeleteRole deletes a role no user has.
func (c *Client) DeleteRole(ctx context.Context, role string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_DELETE_ROLE, Role: role})
	return err
}

// Grant sets role's permissions over the names that start with prefix:
// perms is "read", "lock", "admin", comma-separated, or "all".
func (c *Client) Grant(ctx context.Context, role, prefix, perms string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT, Role: role, Prefix: prefix, Perms: perms})
	return err
}

// Revoke takes role's permissions over prefix away.
func (c *Client) Revoke(ctx context.Context, role, prefix string) error {
	_, err := c.changeAuth(ctx, &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_REVOKE, Role: role, Prefix: prefix})
	return err
}

// GetAuth lists users, roles and permissions (needs read over every name).
func (c *Client) GetAuth(ctx context.Context) (*AuthState, error) {
	var r *batonpb.GetAuthResponse
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.GetAuth(ctx, &batonpb.GetAuthRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &AuthState{Enabled: r.GetEnabled(), You: r.GetYou()}
	for _, u := range r.GetUsers() {
		out.Users = append(out.Users, AuthUser{Name: u.GetName(), Roles: u.GetRoles(), HasToken: u.GetHasToken()})
	}
	for _, ro := range r.GetRoles() {
		ar := AuthRole{Name: ro.GetName()}
		for _, p := range ro.GetPermissions() {
			ar.Permissions = append(ar.Permissions, AuthPermission{Prefix: p.GetPrefix(), Perms: p.GetPerms()})
		}
		out.Roles = append(out.Roles, ar)
	}
	return out, nil
}

// Audit lists the recent admin and auth actions, oldest first (needs read
// over every name).
func (c *Client) Audit(ctx context.Context) ([]AuditEntry, error) {
	var r *batonpb.AuditResponse
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.Audit(ctx, &batonpb.AuditRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(r.GetEntries()))
	for _, e := range r.GetEntries() {
		out = append(out, AuditEntry{Index: e.GetIndex(), Time: e.GetTime().AsTime(), Principal: e.GetPrincipal(), Action: e.GetAction()})
	}
	return out, nil
}
