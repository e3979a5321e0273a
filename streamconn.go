package baton

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/streamconn"
	"github.com/batonlock/baton/api/wire"
)

// The client's Sessions stream to a member travels on Baton's own framing
// (package streamconn) on a connection of its own, unless the member does
// not speak it (it predates it) or the client was given gRPC dial options
// it cannot mirror (WithDialOptions); then it is a gRPC stream, as unary
// calls always are. The messages and their meaning are the same.

// sessionsStream is a Sessions stream as the client's mux uses it.
type sessionsStream interface {
	Send(*batonpb.SessionsRequest) error
	Recv() (*batonpb.SessionsResponse, error)
}

// streamConnDialTimeout bounds connecting to a member and its answer to
// the hello, besides the caller's ctx.
const streamConnDialTimeout = 10 * time.Second

// grpcRetryAfter is how long the client keeps to gRPC for a member that
// answered the preface in another protocol before it tries again (the
// member may have been upgraded).
const grpcRetryAfter = time.Minute

// useStreamConn tells whether the Sessions stream to addr should be tried
// on Baton's framing.
func (c *Client) useStreamConn(addr string) bool {
	if c.cfg.grpcStreams || c.cfg.opaqueDial {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.grpcOnly[addr]
	return !ok || time.Now().After(until)
}

// openStreamConn connects to addr and opens a Sessions stream on Baton's
// framing; the connection closes when ctx ends. ErrNotSpoken (wrapped) says
// the member answered in another protocol.
func (c *Client) openStreamConn(ctx, dialCtx context.Context, addr string) (*connSessions, error) {
	dialCtx, cancel := context.WithTimeout(dialCtx, streamConnDialTimeout)
	defer cancel()
	conn, err := c.dialConn(dialCtx, addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connect to %s: %v", addr, err)
	}
	stop := context.AfterFunc(dialCtx, func() { conn.Close() })
	s, err := handshake(conn, c.cfg.token)
	if !stop() || err != nil {
		conn.Close()
		switch {
		case errors.Is(err, streamconn.ErrNotSpoken):
			c.mu.Lock()
			c.grpcOnly[addr] = time.Now().Add(grpcRetryAfter)
			c.mu.Unlock()
			return nil, err
		case dialCtx.Err() != nil:
			return nil, status.FromContextError(dialCtx.Err()).Err()
		case err == nil:
			return nil, status.Errorf(codes.Unavailable, "open a sessions stream on %s: %v", addr, context.Cause(dialCtx))
		}
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Errorf(codes.Unavailable, "open a sessions stream on %s: %v", addr, err)
	}
	s.ctx = ctx
	context.AfterFunc(ctx, func() { conn.Close() })
	return s, nil
}

// dialConn connects to addr as gRPC would: with the client's dialer, over
// TLS when the client has it.
func (c *Client) dialConn(ctx context.Context, addr string) (net.Conn, error) {
	dial := c.cfg.dialer
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	conn, err := dial(ctx, addr)
	if err != nil || c.cfg.tls == nil {
		return conn, err
	}
	cfg := c.cfg.tls.Clone()
	cfg.NextProtos = nil // the member tells protocols apart by their first bytes
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// handshake sends the preface and the hello, and reads the member's
// answer.
func handshake(conn net.Conn, token string) (*connSessions, error) {
	hello := streamconn.Hello{Client: "baton-go"}
	if token != "" {
		hello.Authorization = "Bearer " + token
	}
	b := streamconn.Append([]byte(streamconn.Preface), streamconn.KindHello, streamconn.AppendHello(nil, hello))
	if _, err := conn.Write(b); err != nil {
		return nil, err
	}
	r := streamconn.NewReader(conn, 16<<10)
	// A member that predates the framing answers the preface as an HTTP/1
	// request; its first byte is never a frame kind.
	if p, err := r.Peek(1); err == nil && p[0] != streamconn.KindAccept && p[0] != streamconn.KindEnd {
		p, _ = r.Peek(min(r.Buffered(), 5))
		return nil, fmt.Errorf("%w (it answered %q)", streamconn.ErrNotSpoken, bytes.ToValidUTF8(p, nil))
	}
	kind, payload, err := r.Next(streamconn.MaxResponseBytes)
	switch {
	case err != nil:
		return nil, err
	case kind == streamconn.KindEnd:
		if err := streamconn.ParseEnd(payload); err != nil {
			return nil, err
		}
		return nil, status.Error(codes.Unavailable, "the member ended the sessions stream as it opened")
	}
	return &connSessions{conn: conn, r: r}, nil
}

// connSessions is the client's Sessions stream on Baton's framing. Send is
// called by the mux's sender, Recv by its reader.
type connSessions struct {
	ctx  context.Context // closes conn when it ends
	conn net.Conn
	r    *streamconn.Reader
	out  streamconn.Frame
}

// Send writes m in one frame, in one write.
func (s *connSessions) Send(m *batonpb.SessionsRequest) error {
	b, err := wire.MarshalSessionsRequest(s.out.Payload(), m)
	if err != nil {
		return status.Errorf(codes.Internal, "sessions stream: encoding a request: %v", err)
	}
	if _, err := s.conn.Write(s.out.Seal(streamconn.KindMessage, b)); err != nil {
		return s.broken(err)
	}
	return nil
}

// Recv reads the next SessionsResponse; the member's end frame is io.EOF
// when it ended the stream cleanly, and its status otherwise.
func (s *connSessions) Recv() (*batonpb.SessionsResponse, error) {
	kind, payload, err := s.r.Next(streamconn.MaxResponseBytes)
	switch {
	case err != nil:
		return nil, s.broken(err)
	case kind == streamconn.KindEnd:
		if err := streamconn.ParseEnd(payload); err != nil {
			return nil, err
		}
		return nil, io.EOF
	case kind != streamconn.KindMessage:
		return nil, status.Errorf(codes.Internal, "sessions stream: the member sent a frame of kind %d", kind)
	}
	m := new(batonpb.SessionsResponse)
	if err := wire.UnmarshalSessionsResponse(payload, m); err != nil {
		return nil, status.Errorf(codes.Internal, "sessions stream: decoding a response: %v", err)
	}
	return m, nil
}

// broken is the status of a stream whose connection failed, as gRPC's
// would be: CANCELED when the client ended it, UNAVAILABLE otherwise.
func (s *connSessions) broken(err error) error {
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	return status.Errorf(codes.Unavailable, "sessions stream: connection lost: %v", err)
}
