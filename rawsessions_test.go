package baton

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/wire"
)

// TestClientUsesSessionsConnections: by default a client's sessions ride a
// Sessions connection, with WithGRPCSessions a gRPC call, and locks work
// either way; the member's /metrics counts the open connections.
func TestClientUsesSessionsConnections(t *testing.T) {
	c, raw := single(t)
	addr := c.members[c.leader()].ClientAddr()
	call := dial(t, addr, WithGRPCSessions())
	for _, tc := range []struct {
		name    string
		cl      *Client
		wantRaw bool
	}{{"default", raw, true}, {"WithGRPCSessions", call, false}} {
		s := newSession(t, tc.cl)
		lease, err := s.Mutex("jobs/" + tc.name).Lock(testCtx(t))
		if err != nil {
			t.Fatalf("%s: lock: %v", tc.name, err)
		}
		if err := lease.Release(testCtx(t)); err != nil {
			t.Fatalf("%s: release: %v", tc.name, err)
		}
		tc.cl.mu.Lock()
		m := tc.cl.muxes[addr]
		tc.cl.mu.Unlock()
		if m == nil {
			t.Fatalf("%s: no Sessions stream to %s", tc.name, addr)
		}
		if _, isRaw := m.gs.(*rawSessions); isRaw != tc.wantRaw {
			t.Errorf("%s: the Sessions stream is %T", tc.name, m.gs)
		}
	}
	if n := metricValue(t, addr, "baton_sessions_connections"); n != 1 {
		t.Errorf("baton_sessions_connections = %d, want 1 (the default client's)", n)
	}
	// Close ends the connection, as it ends gRPC calls.
	raw.Close()
	waitFor(t, 10*time.Second, "the member to see the closed client's connection end", func() bool {
		return metricValue(t, addr, "baton_sessions_connections") == 0
	})
}

// TestSessionsConnectionProtocol drives a Sessions connection by hand: a
// channel opens a session, and a frame over the member's request limit or
// one that does not decode ends the connection with the error, as a gRPC
// call's status would.
func TestSessionsConnectionProtocol(t *testing.T) {
	c, _ := single(t)
	addr := c.members[c.leader()].ClientAddr()

	rs, err := dialRawSessions(testCtx(t), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	if err := rs.Send(&batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 1, Request: openReq(1)}}}); err != nil {
		t.Fatal(err)
	}
	msg, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := msg.GetResponses(); len(r) != 1 || r[0].GetChannel() != 1 || r[0].GetResponse().GetOpen().GetSessionId() == 0 {
		t.Fatalf("open on channel 1: %v", msg)
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		want  codes.Code
	}{
		{"over the limit", binary.BigEndian.AppendUint32(nil, 1<<20+1), codes.ResourceExhausted},
		{"not protobuf", append(binary.BigEndian.AppendUint32(nil, 3), 0xff, 0xff, 0xff), codes.InvalidArgument},
	} {
		rs, err := dialRawSessions(testCtx(t), addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.c.Write(tc.frame); err != nil {
			t.Fatal(err)
		}
		_, err = rs.Recv()
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.want {
			t.Errorf("%s: the stream ended with %v, want %v", tc.name, err, tc.want)
		}
		if _, err := rs.Recv(); err == nil {
			t.Errorf("%s: the connection stays open after its end", tc.name)
		}
		rs.close()
	}

	// The first session's connection was not disturbed.
	if err := rs.Send(&batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 2, Request: openReq(1)}}}); err != nil {
		t.Fatal(err)
	}
	if msg, err := rs.Recv(); err != nil || msg.GetResponses()[0].GetChannel() != 2 {
		t.Fatalf("open on channel 2 after the others ended: %v %v", msg, err)
	}
}

// TestDialSessionsConnectionRefused: a server that does not serve Sessions
// connections (a plain gRPC server, an HTTP/1 server, as a release before
// them or a proxy would be) is told apart from one that is slow to answer,
// which is an error to retry.
func TestDialSessionsConnectionRefused(t *testing.T) {
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	gl := listen()
	gs := grpc.NewServer()
	batonpb.RegisterBatonServer(gs, &sessionOnly{addr: gl.Addr().String()})
	go gs.Serve(gl)
	defer gs.Stop()

	hl := listen()
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(hl)
	defer hs.Close()

	for name, addr := range map[string]string{"gRPC": gl.Addr().String(), "HTTP/1": hl.Addr().String()} {
		if _, err := dialRawSessions(testCtx(t), addr, nil); !errors.Is(err, errNoRawSessions) {
			t.Errorf("%s server: %v, want errNoRawSessions", name, err)
		}
	}

	// Accepts, reads and never answers.
	sl := listen()
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString(0)
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := dialRawSessions(ctx, sl.Addr().String(), nil); err == nil || errors.Is(err, errNoRawSessions) {
		t.Errorf("silent server: %v, want a timeout to retry", err)
	}
	if len(wire.SessionsPreface) <= 24 {
		t.Errorf("the preface is %d bytes: an HTTP/2 server waits for its own preface's 24 before it refuses", len(wire.SessionsPreface))
	}
}
