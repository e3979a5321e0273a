package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/api/streamconn"
	"github.com/batonlock/baton/api/wire"
)

// Sessions streams on Baton's own framing (package streamconn): the same
// handler as gRPC's (Server.Sessions), given a connStream that reads and
// writes the connection itself. A member answers most requests of a fleet
// on a connection of their own, where gRPC's hand-offs to its transport's
// reader and writer were most of the cost of a request.

// matchStreamConn matches a connection that opens with streamconn.Preface.
// It reads no further than the first byte that differs, so HTTP/1 and
// HTTP/2 clients are not kept waiting for bytes they will not send.
func matchStreamConn(r io.Reader) bool {
	var b [1]byte
	for i := 0; i < len(streamconn.Preface); i++ {
		if _, err := io.ReadFull(r, b[:]); err != nil || b[0] != streamconn.Preface[i] {
			return false
		}
	}
	return true
}

// streamConns serves the connections cmux matched as streamconn ones, and
// keeps count of their handlers so that Close can wait for them.
type streamConns struct {
	s       *Server
	timeout time.Duration // from accept to the hello frame
	wg      sync.WaitGroup
}

// serve accepts until l closes.
func (sc *streamConns) serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		sc.wg.Add(1)
		go func() {
			defer sc.wg.Done()
			sc.serveConn(c)
		}()
	}
}

// serveConn reads the preface and the hello, opens the stream and runs
// the Sessions handler on it; its status is the connection's last frame.
func (sc *streamConns) serveConn(c net.Conn) {
	defer c.Close()
	r := streamconn.NewReader(c, 16<<10)
	_ = c.SetReadDeadline(time.Now().Add(sc.timeout))
	hello, err := readHello(r)
	if err != nil {
		sc.s.handshakesFailed.Add(1)
		var f streamconn.Frame
		_, _ = c.Write(f.Seal(streamconn.KindEnd, streamconn.AppendEnd(f.Payload(), err)))
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr(), AuthInfo: authInfoOf(c)})
	if hello.Authorization != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", hello.Authorization))
	}
	st := &connStream{ctx: ctx, c: c, r: r}
	if err := st.write(streamconn.KindAccept, nil); err != nil {
		return
	}
	sc.s.framedStreams.Add(1)
	err = sc.s.Sessions(st)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	_ = st.write(streamconn.KindEnd, func(b []byte) []byte { return streamconn.AppendEnd(b, err) })
}

// readHello reads the preface and the hello frame.
func readHello(r *streamconn.Reader) (streamconn.Hello, error) {
	p, err := r.Peek(len(streamconn.Preface))
	if err != nil || string(p) != streamconn.Preface {
		return streamconn.Hello{}, status.Error(codes.InvalidArgument, "streamconn: the connection does not open with Baton's session preface")
	}
	_, _ = r.Discard(len(p))
	kind, payload, err := r.Next(streamconn.MaxHelloBytes)
	switch {
	case err != nil:
		return streamconn.Hello{}, status.Errorf(codes.InvalidArgument, "streamconn: reading the hello frame: %v", err)
	case kind != streamconn.KindHello:
		return streamconn.Hello{}, status.Errorf(codes.InvalidArgument, "streamconn: frame of kind %d where the hello (kind %d) was expected", kind, streamconn.KindHello)
	}
	h, err := streamconn.ParseHello(payload)
	if err != nil {
		return streamconn.Hello{}, status.Error(codes.InvalidArgument, err.Error())
	}
	return h, nil
}

// authInfoOf is what gRPC's connCreds would tell a handler about c.
func authInfoOf(c net.Conn) credentials.AuthInfo {
	if st := tlsStateOf(c); st != nil {
		return credentials.TLSInfo{State: *st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	return plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}
}

// connStream is a Sessions stream on a streamconn connection, as the
// handler sees a gRPC one (batonpb.Baton_SessionsServer). Recv is called by
// one goroutine, Send by another, as gRPC allows.
type connStream struct {
	ctx context.Context
	c   net.Conn
	r   *streamconn.Reader
	out streamconn.Frame        // Send's
	in  batonpb.SessionsRequest // Recv's
}

var _ batonpb.Baton_SessionsServer = (*connStream)(nil)

// Recv reads the next SessionsRequest. A request over the size limit ends
// the stream with RESOURCE_EXHAUSTED, as gRPC's MaxRecvMsgSize does. The
// message, and its list of requests, are valid until the next Recv (the
// handler keeps only the requests in it, which are each new).
func (st *connStream) Recv() (*batonpb.SessionsRequest, error) {
	kind, payload, err := st.r.Next(rules.MaxRequestBytes)
	var tooLarge *streamconn.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, status.Errorf(codes.ResourceExhausted, "sessions stream: a message of %d bytes, over the limit of %d", tooLarge.Size, tooLarge.Max)
	case err != nil:
		return nil, err
	case kind != streamconn.KindMessage:
		return nil, status.Errorf(codes.InvalidArgument, "sessions stream: frame of kind %d where a message (kind %d) was expected", kind, streamconn.KindMessage)
	}
	m := &st.in
	if err := wire.UnmarshalSessionsRequest(payload, m); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sessions stream: decoding a request: %v", err)
	}
	return m, nil
}

// Send writes m in one frame, in one write.
func (st *connStream) Send(m *batonpb.SessionsResponse) error {
	var merr error
	err := st.write(streamconn.KindMessage, func(b []byte) []byte {
		b, merr = wire.MarshalSessionsResponse(b, m)
		return b
	})
	if merr != nil {
		return status.Errorf(codes.Internal, "sessions stream: encoding a response: %v", merr)
	}
	return err
}

func (st *connStream) write(kind byte, appendPayload func([]byte) []byte) error {
	b := st.out.Payload()
	if appendPayload != nil {
		b = appendPayload(b)
	}
	_, err := st.c.Write(st.out.Seal(kind, b))
	return err
}

func (st *connStream) Context() context.Context { return st.ctx }

// The rest of grpc.ServerStream: the handler sends no headers or trailers.
func (st *connStream) SetHeader(metadata.MD) error  { return nil }
func (st *connStream) SendHeader(metadata.MD) error { return nil }
func (st *connStream) SetTrailer(metadata.MD)       {}

func (st *connStream) SendMsg(m any) error {
	r, ok := m.(*batonpb.SessionsResponse)
	if !ok {
		return fmt.Errorf("sessions stream: cannot send a %T", m)
	}
	return st.Send(r)
}

func (st *connStream) RecvMsg(m any) error {
	r, ok := m.(*batonpb.SessionsRequest)
	if !ok {
		return fmt.Errorf("sessions stream: cannot receive a %T", m)
	}
	got, err := st.Recv()
	if err == nil {
		r.Reset()
		proto.Merge(r, got)
	}
	return err
}
