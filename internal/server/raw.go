package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/soheilhy/cmux"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/wire"
)

// rawWriteTimeout bounds one write of a Sessions connection: a client that
// stops reading is cut off instead of holding its stream's sender (and,
// behind it, its answers) for ever; it resumes its sessions on a new
// stream. gRPC's flow control ends in the same place (errStreamSlow).
const rawWriteTimeout = 15 * time.Second

// rawConns serves Sessions connections (package wire's SessionsPreface):
// the Sessions call of the gRPC service without HTTP/2, served by the same
// handler.
type rawConns struct {
	s      *Server
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (r *rawConns) serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			continue
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		go func() {
			defer func() {
				r.mu.Lock()
				delete(r.conns, c)
				r.mu.Unlock()
				c.Close()
			}()
			r.s.serveRaw(c)
		}()
	}
}

// close ends every Sessions connection, as stopping the gRPC server ends
// every call.
func (r *rawConns) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
}

// matchPreface matches a connection that starts with p. It never reads
// past p: cmux's PrefixMatcher reads one byte more, which a client that
// waits for the answer to its preface never sends. And it decides as soon
// as what arrived differs: a gRPC client sends fewer bytes than p before
// it waits for the server's settings, and so may a short HTTP request.
func matchPreface(p string) cmux.Matcher {
	return func(r io.Reader) bool {
		b := make([]byte, len(p))
		for n := 0; n < len(p); {
			k, err := r.Read(b[n:])
			n += k
			if string(b[:n]) != p[:n] {
				return false
			}
			if err != nil && n < len(p) {
				return false
			}
		}
		return true
	}
}

// serveRaw runs the Sessions handler on one connection.
func (s *Server) serveRaw(c net.Conn) {
	br := bufio.NewReaderSize(c, 64<<10)
	pre := make([]byte, len(wire.SessionsPreface))
	if _, err := io.ReadFull(br, pre); err != nil || string(pre) != wire.SessionsPreface {
		return // cmux matched the preface: not reached
	}
	rs := &rawSessions{c: c, r: br}
	if err := rs.write([]byte(wire.SessionsPreface)); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs.ctx = ctx
	s.rawOpen.Add(1)
	defer s.rawOpen.Add(-1)
	err := s.Sessions(rs)
	if err == nil {
		return // the client closed the connection
	}
	// The stream's end, as a gRPC call's status.
	end := &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{{
		Channel: wire.EndChannel,
		End:     &batonpb.ChannelEnd{Error: s.toWire(err)},
	}}}
	_ = rs.Send(end)
}

// rawSessions is a Sessions connection as the handler sees a gRPC
// stream. Recv is called from one goroutine, Send from another.
type rawSessions struct {
	c    net.Conn
	r    *bufio.Reader
	ctx  context.Context
	rbuf []byte
	wbuf []byte
}

var _ batonpb.Baton_SessionsServer = (*rawSessions)(nil)

func (rs *rawSessions) Recv() (*batonpb.SessionsRequest, error) {
	b, err := wire.ReadFrame(rs.r, MaxRequestBytes, &rs.rbuf)
	if err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return nil, status.Error(codes.ResourceExhausted, err.Error())
		}
		return nil, err
	}
	m := &batonpb.SessionsRequest{}
	if err := wire.UnmarshalSessionsRequest(b, m); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "decoding a Sessions request: %v", err)
	}
	return m, nil
}

func (rs *rawSessions) Send(m *batonpb.SessionsResponse) error {
	b, err := wire.AppendResponseFrame(rs.wbuf[:0], m)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding a Sessions response: %v", err)
	}
	if cap(b) <= 1<<20 {
		rs.wbuf = b
	}
	return rs.write(b)
}

func (rs *rawSessions) write(b []byte) error {
	if err := rs.c.SetWriteDeadline(time.Now().Add(rawWriteTimeout)); err != nil {
		return err
	}
	_, err := rs.c.Write(b)
	return err
}

func (rs *rawSessions) Context() context.Context { return rs.ctx }

// The rest of grpc.ServerStream: the handler uses none of it.
func (rs *rawSessions) SetHeader(metadata.MD) error  { return nil }
func (rs *rawSessions) SendHeader(metadata.MD) error { return nil }
func (rs *rawSessions) SetTrailer(metadata.MD)       {}
func (rs *rawSessions) SendMsg(m any) error {
	r, ok := m.(*batonpb.SessionsResponse)
	if !ok {
		return status.Errorf(codes.Internal, "Sessions connection: cannot send %T", m)
	}
	return rs.Send(r)
}
func (rs *rawSessions) RecvMsg(m any) error {
	r, ok := m.(*batonpb.SessionsRequest)
	if !ok {
		return status.Errorf(codes.Internal, "Sessions connection: cannot receive into %T", m)
	}
	got, err := rs.Recv()
	if err != nil {
		return err
	}
	r.Requests = got.Requests
	return nil
}
