package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/metadata"

	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Authentication: who a request comes from. While authentication is off
// (the replicated AuthState says so) nobody is named and everything is
// allowed. While it is on, a request shows a bearer token ("authorization:
// Bearer TOKEN", as gRPC metadata or an HTTP header) or a verified client
// certificate whose common name is a user's; its user is the principal
// stamped on the commands it makes, and the state machine decides whether
// that user may (fsm/auth.go). Reads, which make no command, are decided
// here against the state they read.

var (
	// errNoCredentials: authentication is on and the request showed no
	// credential, or one that names no user (UNAUTHENTICATED).
	errNoCredentials = errors.New("unauthenticated")
	// errNotPermitted: the request's user may not read or do this
	// (PERMISSION_DENIED); the message names the permission and prefix.
	errNotPermitted = errors.New("permission denied")
)

// authView is what authentication needs of the auth state, copied out of
// the state machine so requests do not take its lock.
type authView struct {
	enabled bool
	tokens  map[fsm.SecretHash]string
	users   map[string]bool
}

// authCache keeps the authView, rebuilt after an auth change applies.
type authCache struct {
	dirty atomic.Bool // an auth change applied (or a snapshot) since the last build
	mu    sync.Mutex
	view  atomic.Pointer[authView]
}

// authView returns the current view, rebuilding it if an auth change
// applied since. A change applied while a request is under way may be
// missed by it: the state machine rechecks every command's user.
func (s *Server) authView() *authView {
	c := &s.authCache
	if v := c.view.Load(); v != nil && !c.dirty.Load() {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.view.Load(); v != nil && !c.dirty.Load() {
		return v
	}
	c.dirty.Store(false)
	v := &authView{}
	if s.node != nil {
		s.node.View(func(m *fsm.Machine) {
			v.enabled = m.AuthEnabled()
			st := m.AuthState()
			v.users = make(map[string]bool, len(st.GetUsers()))
			for _, u := range st.GetUsers() {
				v.users[u.GetName()] = true
			}
			v.tokens = m.UserTokens()
		})
	}
	c.view.Store(v)
	return v
}

// principal authenticates the caller of ctx: its user's name, or "" while
// authentication is off.
func (s *Server) principal(ctx context.Context) (string, error) {
	v := s.authView()
	if !v.enabled {
		return "", nil
	}
	if tok, ok := bearerToken(ctx); ok {
		if name, ok := v.tokens[sha256.Sum256([]byte(tok))]; ok {
			return name, nil
		}
		return "", unauthenticatedf("the bearer token names no user")
	}
	if cn, ok := verifiedName(ctx); ok {
		if v.users[cn] {
			return cn, nil
		}
		return "", unauthenticatedf("the client certificate's common name %q names no user", cn)
	}
	return "", unauthenticatedf("authentication is on: show a bearer token (authorization: Bearer TOKEN) or a client certificate naming a user")
}

// asCaller stamps cmd, the command of a unary request for a session, with
// the hash of the secret the request showed and the user it
// authenticated as: what the state machine checks (a stream stamps its
// own, proven when it attached).
func (s *Server) asCaller(ctx context.Context, cmd *fsmpb.Command, secret string) (err error) {
	cmd.SecretHash = hashSecret(secret)
	cmd.Principal, err = s.principal(ctx)
	return err
}

// bearerToken is the token of the request's "authorization: Bearer"
// metadata (HTTP's Authorization header reaches handlers as it).
func bearerToken(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:]), true
		}
	}
	return "", false
}

// mayRead refuses a read of name (a lock, or a prefix) by principal
// unless it has read over it. Call it inside the View that reads.
func mayRead(m *fsm.Machine, principal, name string) error {
	return may(m, principal, name, fsm.PermRead)
}

func may(m *fsm.Machine, principal, name string, p fsm.Perm) error {
	if m.Allowed(principal, name, p) {
		return nil
	}
	return notPermittedf("user %q has no %s permission over %q", principal, p, name)
}

func unauthenticatedf(format string, args ...any) error {
	return wrapf(errNoCredentials, format, args...)
}

func notPermittedf(format string, args ...any) error {
	return wrapf(errNotPermitted, format, args...)
}

// reader starts a linearizable read: it validates name (unless field is
// empty), authenticates the caller and waits for the read barrier. The
// caller checks the permission in the View that reads (mayRead).
func (s *Server) reader(ctx context.Context, field, name string) (string, error) {
	if field != "" {
		if err := checkName(field, name); err != nil {
			return "", err
		}
	}
	who, err := s.principal(ctx)
	if err != nil {
		return "", err
	}
	return who, s.node.ReadBarrier(ctx)
}
