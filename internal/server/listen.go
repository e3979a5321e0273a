package server

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/api/wire"
)

// Listener serves the API on one address: gRPC (HTTP/2 with content-type
// application/grpc) and HTTP/JSON (everything else), split by cmux as
// etcd's client port does.
type Listener struct {
	m     cmux.CMux
	conns *trackedListener
	grpc  *grpc.Server
	http  *http.Server
	done  chan error
}

// flowWindow is the HTTP/2 flow-control window of client connections and
// their streams, as the client's (package baton).
const flowWindow = 1 << 20

// Serve starts serving s on l and returns at once; Close stops it.
// extra, when non-nil, serves HTTP paths outside /v1/ (dashboard, metrics).
func Serve(l net.Listener, s *Server, extra http.Handler) (*Listener, error) {
	gs := grpc.NewServer(
		// Bigger requests are refused with RESOURCE_EXHAUSTED (413 over
		// HTTP) before they are read.
		grpc.MaxRecvMsgSize(rules.MaxRequestBytes),
		grpc.Creds(connCreds{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// A fixed window, as the client's (the client's flowWindow): no bandwidth
		// estimation pings, few window updates.
		grpc.InitialWindowSize(flowWindow), grpc.InitialConnWindowSize(flowWindow),
		// Sessions streams decoded without protobuf's reflection.
		grpc.ForceServerCodecV2(wire.Codec{}),
	)
	batonpb.RegisterBatonServer(gs, s)
	jsonpb := &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb))
	if err := batonpb.RegisterBatonHandlerServer(context.Background(), gw, s); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.MaxBytesHandler(gw, rules.MaxRequestBytes))
	mux.Handle("/v1/watch", s.httpWatch(jsonpb.Marshal))
	if extra != nil {
		mux.Handle("/", extra)
	}
	tl := &trackedListener{Listener: l, conns: map[*trackedConn]struct{}{}}
	m := cmux.New(tl)
	grpcL := m.MatchWithWriters(cmux.HTTP2MatchHeaderFieldSendSettings("content-type", "application/grpc"))
	httpL := m.Match(cmux.Any())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if st := tlsStateOf(c); st != nil {
				return context.WithValue(ctx, tlsStateKey{}, st)
			}
			return ctx
		},
	}
	ln := &Listener{m: m, conns: tl, grpc: gs, http: hs, done: make(chan error, 3)}
	go func() { ln.done <- ignoreClosed(gs.Serve(grpcL)) }()
	go func() { ln.done <- ignoreClosed(hs.Serve(httpL)) }()
	go func() { ln.done <- ignoreClosed(m.Serve()) }()
	return ln, nil
}

// Close stops accepting, ends every call and connection, and waits for
// the servers.
func (l *Listener) Close() {
	l.m.Close()
	l.grpc.Stop()
	_ = l.http.Close()
	// The servers closed the connections cmux handed them; those it is
	// still matching (no request yet) only this ends, and cmux's Serve
	// waits for them.
	l.conns.closeAll()
	for range 3 {
		<-l.done
	}
}

// trackedListener keeps the connections it accepted until they close, so
// that Listener.Close can end them all. cmux reads a new connection until
// it can tell gRPC from HTTP, with no deadline, and its Close neither
// ends that read nor lets its Serve return before it does: a client that
// connected and has sent no request yet (a gRPC client connects before
// its first call, and a TLS client may not have finished its handshake)
// would hold Close, and `baton server`'s exit, for as long as it stays.
type trackedListener struct {
	net.Listener
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every connection still open, and any accepted later.
func (l *trackedListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := slices.Collect(maps.Keys(l.conns))
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// trackedConn is an accepted connection that leaves its listener's set
// when closed.
type trackedConn struct {
	net.Conn
	l *trackedListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) ||
		errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, cmux.ErrListenerClosed) ||
		strings.Contains(err.Error(), "use of closed network connection") {
		return nil
	}
	return err
}
