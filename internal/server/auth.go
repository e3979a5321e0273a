package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Operator calls: they act on other sessions' holds or on the cluster
// itself, so with Config.Operators set only those clients may make them.
// Everything else (sessions, locks, reads) is open to any client the
// client port admits.

// operator authenticates the caller of an operator call. With
// authentication on, it returns the caller's user, whose permissions the
// state machine (or, for membership, the handler) checks. Otherwise it
// refuses op unless operators are unrestricted or the caller showed a
// verified client certificate whose common name is one of
// Config.Operators.
func (s *Server) operator(ctx context.Context, op string) (string, error) {
	who, err := s.principal(ctx)
	if err != nil || s.authView().enabled {
		return who, err
	}
	return "", s.authorizeOperator(ctx, op)
}

func (s *Server) authorizeOperator(ctx context.Context, op string) error {
	if len(s.cfg.Operators) == 0 {
		return nil
	}
	cn, ok := verifiedName(ctx)
	switch {
	case !ok:
		return status.Errorf(codes.PermissionDenied, "%s is an operator call: show a client certificate whose common name is among the members' operators (baton server --operators)", op)
	case !slices.Contains(s.cfg.Operators, cn):
		return status.Errorf(codes.PermissionDenied, "%s is an operator call, and the client certificate's common name %q is not among the members' operators (baton server --operators)", op, cn)
	}
	return nil
}

// verifiedName is the subject common name of the caller's client
// certificate, if the TLS handshake verified one.
func verifiedName(ctx context.Context) (string, bool) {
	var st *tls.ConnectionState
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			st = &info.State
		}
	}
	if st == nil {
		st, _ = ctx.Value(tlsStateKey{}).(*tls.ConnectionState)
	}
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return "", false
	}
	return st.PeerCertificates[0].Subject.CommonName, true
}

// tlsStateKey keys an HTTP request's TLS state in its context: the HTTP
// server sees the connection through cmux, so it does not set Request.TLS.
type tlsStateKey struct{}

// tlsStateOf finds the TLS connection under c (cmux wraps it) and returns
// its state, or nil when c is not TLS. The handshake is over by then: cmux
// read the first bytes through it to tell gRPC from HTTP.
func tlsStateOf(c net.Conn) *tls.ConnectionState {
	for {
		switch v := c.(type) {
		case *tls.Conn:
			st := v.ConnectionState()
			return &st
		case *cmux.MuxConn:
			c = v.Conn
		case *trackedConn:
			c = v.Conn
		default:
			return nil
		}
	}
}

// connCreds are gRPC transport credentials that do no handshake of their
// own (TLS, when on, wraps the listener before cmux) but tell gRPC what
// the TLS handshake established, so handlers can read the caller's
// certificate from the peer.
type connCreds struct{}

type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

func (connCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if st := tlsStateOf(c); st != nil {
		return c, credentials.TLSInfo{State: *st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
	}
	return c, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (connCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("server: connCreds serve only")
}

func (connCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls-or-plain"}
}

func (c connCreds) Clone() credentials.TransportCredentials { return c }

func (connCreds) OverrideServerName(string) error { return nil }
