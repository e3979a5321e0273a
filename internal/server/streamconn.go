package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
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
	"github.com/soheilhy/cmux"
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
	st := newConnStream(ctx, c, r)
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
// one goroutine, Send by another, as gRPC allows; on plain TCP the flusher
// may also write, without blocking (trySend).
type connStream struct {
	ctx context.Context
	c   net.Conn
	r   *streamconn.Reader
	in  batonpb.SessionsRequest // Recv's
	// raw is c's socket when c is plain TCP, for trySend; nil on TLS,
	// whose records only c itself may write.
	raw     syscall.RawConn
	rawSend func(fd uintptr) bool // writeOnce as a func value, made once

	wmu  sync.Mutex       // one writer at a time; guards what follows
	out  streamconn.Frame // the frame being written
	pend []byte           // what trySend could not write at once: it leaves first
	werr error            // a write of trySend or of pend failed: every later write fails so
	// writeOnce's argument and results.
	try    []byte
	tryN   int
	tryErr error
}

var _ batonpb.Baton_SessionsServer = (*connStream)(nil)

func newConnStream(ctx context.Context, c net.Conn, r *streamconn.Reader) *connStream {
	st := &connStream{ctx: ctx, c: c, r: r, raw: rawConnOf(c)}
	st.rawSend = st.writeOnce
	return st
}

// rawConnOf is the socket of c when c is a plain TCP connection (under
// cmux's and the listener's wrappers), else nil.
func rawConnOf(c net.Conn) syscall.RawConn {
	for {
		switch v := c.(type) {
		case *cmux.MuxConn:
			c = v.Conn
		case *trackedConn:
			c = v.Conn
		case *net.TCPConn:
			return socketOf(v)
		default:
			return nil
		}
	}
}

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

// Send writes m in one frame, in one write (after what trySend left).
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
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if err := st.flushLocked(); err != nil {
		return err
	}
	b := st.out.Payload()
	if appendPayload != nil {
		b = appendPayload(b)
	}
	_, err := st.c.Write(st.out.Seal(kind, b))
	return err
}

// trySend queues m's frame on the connection without blocking: what the
// socket does not take at once waits in pend for the stream's sender
// (flushPending), and so does everything sent after it. Only on plain TCP
// (raw).
func (st *connStream) trySend(m *batonpb.SessionsResponse) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if st.werr != nil {
		return st.werr
	}
	b, err := wire.MarshalSessionsResponse(st.out.Payload(), m)
	if err != nil {
		return status.Errorf(codes.Internal, "sessions stream: encoding a response: %v", err)
	}
	b = st.out.Seal(streamconn.KindMessage, b)
	if len(st.pend) > 0 {
		st.pend = append(st.pend, b...)
		return nil
	}
	st.try = b
	err = st.raw.Write(st.rawSend)
	n := st.tryN
	if err == nil {
		err = st.tryErr
	}
	st.try, st.tryErr = nil, nil
	if err != nil {
		st.werr = err
		return err
	}
	if n < len(b) {
		st.pend = append(st.pend, b[n:]...)
	}
	return nil
}

// pending reports whether trySend left bytes for the stream's sender.
func (st *connStream) pending() bool {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	return len(st.pend) > 0 || st.werr != nil
}

// flushPending writes, blocking, what trySend left; or fails as it did.
func (st *connStream) flushPending() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	return st.flushLocked()
}

func (st *connStream) flushLocked() error {
	if st.werr != nil {
		return st.werr
	}
	if len(st.pend) == 0 {
		return nil
	}
	_, err := st.c.Write(st.pend)
	st.pend = nil
	if err != nil {
		st.werr = err
	}
	return err
}

// nonBlocking sends as trySend does, for sendQueued.
type nonBlocking connStream

func (nb *nonBlocking) Send(m *batonpb.SessionsResponse) error { return (*connStream)(nb).trySend(m) }

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
