package embed_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/api/streamconn"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
)

// TestSessionsOnTheFraming: a client's sessions go on Baton's own framing
// by default, and locks work across two clients there; one told to use
// gRPC (WithGRPCSessionStreams) gets the same answers on gRPC.
func TestSessionsOnTheFraming(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	framed := framedStreams(t, c)
	a, err := baton.Dial(ctx, c.Endpoints(0))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := baton.Dial(ctx, c.Endpoints(0), baton.WithGRPCSessionStreams())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sa, err := a.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := framedStreams(t, c); got != framed+1 {
		t.Fatalf("framed streams went from %d to %d; want one more (a's, not b's)", framed, got)
	}
	la, err := sa.Mutex("framing/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Mutex("framing/x").TryLock(ctx); !errors.Is(err, baton.ErrLockBusy) {
		t.Fatalf("b's TryLock over gRPC while a holds the lock: %v; want busy", err)
	}
	got := make(chan error, 1)
	go func() {
		lb, err := sb.Mutex("framing/x").Lock(ctx)
		if err == nil && lb.Token() <= la.Token() {
			err = status.Errorf(codes.Internal, "b's token %d is not above a's %d", lb.Token(), la.Token())
		}
		got <- err
	}()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("b's Lock after a's release: %v", err)
	}
}

// TestOldMemberFallsBackToGRPC: a member that predates the framing
// answers its preface as a malformed HTTP/1 request; the client then
// opens its sessions on gRPC, and they work.
func TestOldMemberFallsBackToGRPC(t *testing.T) {
	c := startCluster(t, 1, snapshotOften, embedtest.Configure(func(_ int, cfg *embed.Config) {
		cfg.ClientListener = oldMemberListener{cfg.ClientListener}
	}))
	c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := baton.Dial(ctx, c.Endpoints(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatalf("a session on a member without the framing: %v", err)
	}
	l, err := s.Mutex("old/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := framedStreams(t, c); got != 0 {
		t.Fatalf("%d framed streams on a member without the framing", got)
	}
}

// oldMemberListener plays a member that predates the framing: a
// connection that opens with its preface is answered as Go's HTTP server
// answers a request line it cannot parse, and closed; the others are the
// member's.
type oldMemberListener struct{ net.Listener }

func (l oldMemberListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		first := make([]byte, 4)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.ReadFull(conn, first)
		conn.SetReadDeadline(time.Time{})
		if n == len(first) && bytes.Equal(first, []byte(streamconn.Preface[:4])) {
			io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
			conn.Close()
			continue
		}
		return &replayConn{Conn: conn, first: first[:n]}, nil
	}
}

// replayConn is a connection whose first bytes were read already.
type replayConn struct {
	net.Conn
	first []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// TestFramingRefusesMalformedStreams: a request over the size limit ends
// the stream with RESOURCE_EXHAUSTED before it is read, and a frame of the
// wrong kind with INVALID_ARGUMENT naming it; each in an end frame, then
// the member closes the connection.
func TestFramingRefusesMalformedStreams(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	c.WaitLeader()
	for _, tc := range []struct {
		name string
		send []byte
		code codes.Code
		want string
	}{
		{"over the limit", []byte{streamconn.KindMessage, 0xff, 0xff, 0xff, 0xff, 0x0f}, codes.ResourceExhausted, "over the limit"},
		{"one byte over the limit", binary.AppendUvarint([]byte{streamconn.KindMessage}, rules.MaxRequestBytes+1), codes.ResourceExhausted, "over the limit"},
		{"a second hello", streamconn.Append(nil, streamconn.KindHello, nil), codes.InvalidArgument, "frame of kind 1"},
		{"undecodable request", streamconn.Append(nil, streamconn.KindMessage, []byte{0x0a, 0x05, 0x01}), codes.InvalidArgument, "decoding a request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, c)
			hello := streamconn.Append([]byte(streamconn.Preface), streamconn.KindHello, nil)
			if _, err := conn.Write(append(hello, tc.send...)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			r := streamconn.NewReader(conn, 4096)
			if kind, _, err := r.Next(streamconn.MaxResponseBytes); err != nil || kind != streamconn.KindAccept {
				t.Fatalf("first frame: kind %d, %v; want the accept", kind, err)
			}
			kind, payload, err := r.Next(streamconn.MaxResponseBytes)
			if err != nil || kind != streamconn.KindEnd {
				t.Fatalf("second frame: kind %d, %v; want the end", kind, err)
			}
			end := streamconn.ParseEnd(payload)
			if status.Code(end) != tc.code || !strings.Contains(end.Error(), tc.want) {
				t.Fatalf("end: %v; want %v mentioning %q", end, tc.code, tc.want)
			}
			if _, _, err := r.Next(streamconn.MaxResponseBytes); err != io.EOF {
				t.Fatalf("after the end: %v; want the connection closed", err)
			}
		})
	}
}

// framedStreams reads baton_sessions_streams_framed_total from the
// member's /metrics.
func framedStreams(t *testing.T, c *embedtest.Cluster) int {
	t.Helper()
	for line := range strings.Lines(httpGet(t, dial(t, c), "/metrics")) {
		if v, ok := strings.CutPrefix(line, "baton_sessions_streams_framed_total "); ok {
			var n int
			for _, ch := range strings.TrimSpace(v) {
				n = n*10 + int(ch-'0')
			}
			return n
		}
	}
	t.Fatal("/metrics has no baton_sessions_streams_framed_total")
	return 0
}
