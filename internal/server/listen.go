package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Listener serves the API on one address: Sessions streams on Baton's own
// framing (package streamconn), gRPC (HTTP/2 with content-type
// application/grpc) and HTTP/JSON (everything else), split by cmux as
// etcd's client port does.
type Listener struct {
	m       cmux.CMux
	conns   *trackedListener
	grpc    *grpc.Server
	http    *http.Server
	streams *streamConns
	done    chan error
}

// flowWindow is the HTTP/2 flow-control window of client connections and
// their streams, as the client's (package baton).
const flowWindow = 1 << 20

// Serve starts serving s on l and returns at once; Close stops it.
// extra, when non-nil, serves HTTP paths outside /v1/ (dashboard, metrics).
func Serve(l net.Listener, s *Server, extra http.Handler) (*Listener, error) {
	lim := s.cfg.Limits
	gs := grpc.NewServer(
		// Bigger requests are refused with RESOURCE_EXHAUSTED (413 over
		// HTTP) before they are read.
		grpc.MaxRecvMsgSize(rules.MaxRequestBytes),
		grpc.Creds(connCreds{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// A connection without a call for IdleTimeout is sent GOAWAY and
		// closed; its client connects again for its next call.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: lim.IdleTimeout}),
		// A fixed window, as the client's (the client's flowWindow): no bandwidth
		// estimation pings, few window updates.
		grpc.InitialWindowSize(flowWindow), grpc.InitialConnWindowSize(flowWindow),
		// Sessions streams decoded without protobuf's reflection.
		grpc.ForceServerCodecV2(wire.Codec{}),
	)
	batonpb.RegisterBatonServer(gs, s)
	jsonpb := gatewayJSON()
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb),
		runtime.WithRoutingErrorHandler(routingError), runtime.WithErrorHandler(httpError))
	if err := batonpb.RegisterBatonHandlerServer(context.Background(), gw, s); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", limitBody(gw, rules.MaxRequestBytes))
	mux.Handle("/v1/watch", s.httpWatch(jsonpb.Marshal))
	mux.Handle("/v1/snapshot", s.httpSaveSnapshot())
	if extra != nil {
		mux.Handle("/", extra)
	}
	tl := &trackedListener{Listener: l, conns: map[*trackedConn]struct{}{}, max: lim.MaxClientConns, log: s.log, born: time.Now()}
	s.clientConns.Store(tl)
	m := cmux.New(tl)
	// A new connection has HandshakeTimeout to show what it speaks (TLS
	// wraps l, so its handshake is in that time too); one that does not is
	// closed unmatched. A gRPC client shows it with its first call's
	// headers, so one that connected and makes no call is closed too: it
	// connects again for its call.
	m.SetReadTimeout(lim.HandshakeTimeout)
	m.HandleError(func(err error) bool {
		if _, ok := err.(cmux.ErrNotMatched); ok {
			s.handshakesFailed.Add(1)
		}
		return true // cmux's own handling: go on unless the error is permanent
	})
	// Baton's session framing first: its matcher reads only as far as the
	// preface agrees, and the others would wait for bytes it never sends.
	streamL := m.Match(matchStreamConn)
	grpcL := m.MatchWithWriters(cmux.HTTP2MatchHeaderFieldSendSettings("content-type", "application/grpc"))
	httpL := m.Match(matchHTTP1)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: lim.HandshakeTimeout, IdleTimeout: lim.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if st := tlsStateOf(c); st != nil {
				return context.WithValue(ctx, tlsStateKey{}, st)
			}
			return ctx
		},
	}
	ln := &Listener{m: m, conns: tl, grpc: gs, http: hs, streams: &streamConns{s: s, timeout: lim.HandshakeTimeout}, done: make(chan error, 4)}
	go func() { ln.done <- ignoreClosed(gs.Serve(grpcL)) }()
	go func() { ln.done <- ignoreClosed(ln.streams.serve(streamL)) }()
	go func() { ln.done <- ignoreClosed(hs.Serve(httpL)) }()
	go func() { ln.done <- ignoreClosed(m.Serve()) }()
	return ln, nil
}

// gatewayJSON is how the HTTP/JSON gateway reads requests and writes
// answers: proto field names, every field written, unknown fields
// refused.
func gatewayJSON() *runtime.JSONPb {
	return &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
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
	for range cap(l.done) {
		<-l.done
	}
	l.streams.wg.Wait()
}

// trackedListener keeps the connections it accepted until they close, so
// that Listener.Close can end them all and /metrics can count them, and
// closes at once each connection accepted while max are open: a member
// keeps file descriptors for its log, its snapshots and its peers however
// many clients connect, and an accepted connection leaves the listen
// backlog, so that it does not fill and the client learns of the refusal
// at once (and tries another member) instead of timing out.
//
// cmux reads a new connection until it can tell gRPC from HTTP, and its
// Close neither ends that read nor lets its Serve return before it does: a
// client that connected and has sent no request yet (a gRPC client
// connects before its first call, and a TLS client may not have finished
// its handshake) would hold Close, and `baton server`'s exit, until it
// sends or its time to do so runs out.
type trackedListener struct {
	net.Listener
	max int // 0: no limit
	log *slog.Logger

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool

	refused atomic.Uint64
	// warned is when a refusal was last logged, in nanoseconds since
	// born: one line per refusalLogInterval, not one per refusal.
	warned atomic.Int64
	born   time.Time
}

// refusalLogInterval spaces the warnings about refused connections.
const refusalLogInterval = 10 * time.Second

func (l *trackedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		if l.max > 0 && len(l.conns) >= l.max {
			l.mu.Unlock()
			c.Close()
			l.refuse()
			continue
		}
		tc := &trackedConn{Conn: c, l: l}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

// refuse counts a connection closed for the limit, and says so in the log
// now and then.
func (l *trackedListener) refuse() {
	n := l.refused.Add(1)
	now := int64(time.Since(l.born))
	last := l.warned.Load()
	if (last == 0 || now-last >= int64(refusalLogInterval)) && l.warned.CompareAndSwap(last, now) {
		l.log.Warn("client connections refused: the client port has as many open as --max-client-conns allows",
			"max_client_conns", l.max, "refused_total", n)
	}
}

// open is how many accepted connections are open.
func (l *trackedListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
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

// matchHTTP1 matches a connection that sent something other than
// HTTP/2's client preface: an HTTP/1 request (the gRPC matcher before it
// took gRPC). One that sent nothing before the handshake deadline, or
// sent HTTP/2 but no gRPC call in time, is left unmatched and closed.
func matchHTTP1(r io.Reader) bool {
	const h2 = "PRI " // the start of HTTP/2's client preface
	var b [len(h2)]byte
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if string(b[:n]) != h2[:n] {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) ||
		errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, cmux.ErrListenerClosed) ||
		strings.Contains(err.Error(), "use of closed network connection") {
		return nil
	}
	return err
}
