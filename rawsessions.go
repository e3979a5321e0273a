package baton

// The Sessions stream on a connection of its own (package wire's
// SessionsPreface) instead of a gRPC call: the same batches and channels,
// without HTTP/2 and the two goroutine hand-offs gRPC puts on each side
// of each direction (its reader and its writer goroutines), which are on
// the path of every acquire and release.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/wire"
)

const (
	// rawDialTimeout bounds connecting, the TLS handshake and the
	// member's answer to the preface.
	rawDialTimeout = 5 * time.Second
	// rawWriteTimeout cuts off a member that stops reading; the sessions
	// resume on a new stream.
	rawWriteTimeout = 15 * time.Second
	// maxResponseFrame is the largest Sessions message read: gRPC's
	// default receive limit, which the member keeps its messages under.
	maxResponseFrame = 4 << 20
)

// rawKeepAlive ends a connection whose member vanished without closing it
// (power loss, partition) in about 25 s while it is idle; sessions notice
// sooner, by their keepalives.
var rawKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}

// errNoRawSessions: the member did not answer the preface (a release
// before Sessions connections, or a proxy that passes only gRPC).
var errNoRawSessions = errors.New("member does not serve Sessions connections")

// noRawFor is how long a client uses gRPC calls for a member that did not
// answer a Sessions connection before it tries one again (a member
// upgraded in a rolling upgrade; one that crashed as it answered).
const noRawFor = time.Minute

// muxStream is what a sessionMux reads and writes: a gRPC Sessions call
// or a Sessions connection.
type muxStream interface {
	Send(*batonpb.SessionsRequest) error
	Recv() (*batonpb.SessionsResponse, error)
}

// rawSessions is a Sessions connection. Send is called from the mux's
// sender, Recv from its reader.
type rawSessions struct {
	c    net.Conn
	r    *bufio.Reader
	rbuf []byte
	wbuf []byte
}

// dialRawSessions opens a Sessions connection to addr, over TLS when tc
// is set.
func dialRawSessions(ctx context.Context, addr string, tc *tls.Config) (*rawSessions, error) {
	ctx, cancel := context.WithTimeout(ctx, rawDialTimeout)
	defer cancel()
	d := net.Dialer{KeepAliveConfig: rawKeepAlive}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		if tc.ServerName == "" {
			tc = tc.Clone()
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tlc := tls.Client(c, tc)
		if err := tlc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		c = tlc
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	rs := &rawSessions{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	_, err = io.WriteString(c, wire.SessionsPreface)
	got := make([]byte, len(wire.SessionsPreface))
	if err == nil {
		_, err = io.ReadFull(rs.r, got)
		switch {
		case err == nil && string(got) != wire.SessionsPreface:
			err = fmt.Errorf("%w: it answered %q", errNoRawSessions, got)
		case err != nil:
			// Closed or reset: an HTTP/2 server reads its client
			// preface's length and hangs up.
			err = fmt.Errorf("%w: %w", errNoRawSessions, err)
		}
	}
	if !stop() && err != nil {
		err = fmt.Errorf("sessions connection to %s: %w", addr, context.Cause(ctx))
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return rs, nil
}

func (rs *rawSessions) Send(m *batonpb.SessionsRequest) error {
	b, err := wire.AppendRequestFrame(rs.wbuf[:0], m)
	if err != nil {
		return err
	}
	if cap(b) <= 1<<20 {
		rs.wbuf = b
	}
	if err := rs.c.SetWriteDeadline(time.Now().Add(rawWriteTimeout)); err != nil {
		return err
	}
	_, err = rs.c.Write(b)
	return err
}

// Recv returns the next batch of responses; the member's end of the
// stream comes back as the error it sent, a closed connection as
// Unavailable.
func (rs *rawSessions) Recv() (*batonpb.SessionsResponse, error) {
	b, err := wire.ReadFrame(rs.r, maxResponseFrame, &rs.rbuf)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Code: codes.Unavailable, Message: "the member closed the sessions connection"}
		}
		return nil, &Error{Code: codes.Unavailable, Message: "sessions connection: " + err.Error()}
	}
	m := &batonpb.SessionsResponse{}
	if err := wire.UnmarshalSessionsResponse(b, m); err != nil {
		return nil, &Error{Code: codes.Internal, Message: "decoding a Sessions response: " + err.Error()}
	}
	if rs := m.GetResponses(); len(rs) == 1 && rs[0].GetChannel() == wire.EndChannel && rs[0].GetEnd() != nil {
		if err := fromWire(rs[0].GetEnd().GetError()); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	return m, nil
}

func (rs *rawSessions) close() { rs.c.Close() }
