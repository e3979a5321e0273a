package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/batonlock/baton/internal/transport/transportpb"
)

// preface opens every connection, so that anything else (an older member
// speaking gRPC, a stray client) is told apart at once.
const preface = "BATON-PEER/1\n"

// removedNotice is what a member writes on the connection of a peer whose
// removal it applied, before closing it (peer connections are otherwise
// one-way).
const removedNotice = "BATON-REMOVED\n"

// foreignNotice is what a member writes on a connection whose Hello names
// another cluster, before closing it (as long as removedNotice).
const foreignNotice = "BATON-FOREIGN\n"

// errForeign ends a connection from a member of another cluster.
var errForeign = errors.New("the peer belongs to another cluster")

// foreignCause is what the logs of a refusal between clusters say of its
// likely causes, the usual one first: a new cluster started on the peer
// addresses of one that still runs (a 3-member example started beside a
// single node on the same ports), or a member added without --join.
const foreignCause = "Most likely two clusters use the same peer addresses: give each cluster its own ports (--peer-addr, --initial-cluster) and data dirs, or stop the other one. " +
	"Else a member added by 'baton member add' was started without --join, or with a data dir of another cluster (it needs --join and an empty data dir)"

// errPeerRemoved ends the connection of a removed member.
var errPeerRemoved = errors.New("the peer was removed from the cluster: told it so")

// keepAliveConfig is set on every peer connection, both ends.
var keepAliveConfig = net.KeepAliveConfig{
	Enable: true, Idle: keepaliveIdle, Interval: keepaliveInterval, Count: keepaliveCount,
}

// inbound is one inbound connection from a peer. Only the newest
// connection of a peer delivers; mu serialises delivery between an old
// connection and its successor, so that once the successor has
// registered, the old one never calls Receive again.
type inbound struct {
	mu         *sync.Mutex // shared by all connections of one peer id
	superseded bool        // guarded by mu
	conn       net.Conn
}

// accept serves the listener until Stop.
func (t *Transport) accept() {
	var pause time.Duration
	for {
		c, err := t.lis.Accept()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				// The listener broke: the member can no longer receive.
				t.log.Error("peer listener failed", "err", err)
				return
			}
			// Anything else (out of file descriptors, an aborted
			// handshake) may pass: retry after a growing pause, as
			// net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			t.log.Warn("accepting a peer connection failed; retrying", "err", err, "in", pause)
			select {
			case <-time.After(pause):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		pause = 0
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1) // under mu, before Stop's Wait can begin
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			defer func() {
				c.Close()
				t.mu.Lock()
				delete(t.conns, c)
				t.mu.Unlock()
			}()
			if err := t.serveConn(c); err != nil && t.ctx.Err() == nil {
				t.log.Debug("peer connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// serveConn reads one inbound connection: the preface, a Hello, then
// Envelopes, each delivered in order. With TLS, a connection whose
// certificate does not name the member its Hello claims is closed after
// the Hello (identity.go).
func (t *Transport) serveConn(c net.Conn) error {
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetKeepAliveConfig(keepAliveConfig); err != nil {
			t.log.Debug("cannot set TCP keepalive", "err", err)
		}
	}
	var certNamed []string // with TLS: the names its verified certificate gives
	if t.cfg.TLS != nil {
		tc := tls.Server(c, t.cfg.TLS)
		ctx, cancel := context.WithTimeout(t.ctx, connectTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			t.repeats.log(t.log, slog.LevelWarn, "tls/"+remoteHost(c), "refused a peer connection: TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			return err
		}
		c = tc
		certNamed = certNames(tc.ConnectionState())
	}
	r := bufio.NewReaderSize(c, 64<<10)
	if err := c.SetReadDeadline(time.Now().Add(connectTimeout)); err != nil {
		return err
	}
	got := make([]byte, len(preface))
	if _, err := io.ReadFull(r, got); err != nil {
		return fmt.Errorf("reading the preface: %w", err)
	}
	if !bytes.Equal(got, []byte(preface)) {
		t.repeats.log(t.log, slog.LevelWarn, "preface/"+remoteHost(c), "refused a peer connection that does not speak "+preface[:len(preface)-1]+" (a member of another release?)",
			"remote", c.RemoteAddr().String())
		return errors.New("bad preface")
	}
	var buf []byte
	env, err := readFrame(r, &buf)
	if err != nil {
		return fmt.Errorf("reading the Hello: %w", err)
	}
	hello := env.GetHello()
	from := hello.GetId()
	if from == 0 || from == t.cfg.ID {
		t.log.Warn("refused a peer connection without a Hello from another member", "id", from, "remote", c.RemoteAddr().String())
		return fmt.Errorf("first frame is not a Hello from another member (id %d)", from)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	log := t.log.With("peer", from)
	// A removed member is no longer among the peers whose names are
	// known: whoever claims its id is only told it was removed (or of
	// another cluster) below, and nothing it sends is read.
	if t.cfg.TLS != nil && !t.isRemoved(from) {
		if err := t.checkClaim(c, from, certNamed); err != nil {
			return err
		}
	}
	theirs := hello.GetClusterId()
	if t.foreign(theirs) {
		return t.tellForeign(c, hello, log)
	}
	if t.isRemoved(from) {
		return t.tellRemoved(c, from, log)
	}
	in := t.register(from, hello, c)
	log.Debug("peer connection opened", "name", hello.GetName(), "peer_addr", hello.GetPeerAddr())
	for {
		env, err := readFrame(r, &buf)
		if err != nil {
			return err // the peer went away or Stop; its sender reports it
		}
		if t.isRemoved(from) {
			return t.tellRemoved(c, from, log)
		}
		if t.foreign(theirs) { // this member learnt its cluster's id since
			return t.tellForeign(c, hello, log)
		}
		if !t.deliver(in, from, env, log) {
			return errors.New("superseded by a newer connection from the same peer")
		}
	}
}

// remoteHost is the host of c's remote address: a peer's reconnects
// come from new ports.
func remoteHost(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// foreign reports whether a Hello's cluster id names another cluster than
// this member's (both known).
func (t *Transport) foreign(theirs uint64) bool {
	mine := t.clusterID()
	return mine != 0 && theirs != 0 && mine != theirs
}

// tellForeign refuses a member of another cluster with foreignNotice.
func (t *Transport) tellForeign(c net.Conn, hello *transportpb.Hello, log *slog.Logger) error {
	t.repeats.log(log, slog.LevelError, "foreign-in/"+hello.GetName()+"/"+fmt.Sprintf("%x", hello.GetClusterId()),
		"refused a peer of another cluster. "+foreignCause,
		"name", hello.GetName(), "remote", c.RemoteAddr().String(),
		"its_cluster", fmt.Sprintf("%x", hello.GetClusterId()), "ours", fmt.Sprintf("%x", t.clusterID()))
	if err := c.SetWriteDeadline(time.Now().Add(writeTimeout)); err == nil {
		_, _ = c.Write([]byte(foreignNotice))
	}
	return errForeign
}

// tellRemoved writes removedNotice to a removed member's connection.
func (t *Transport) tellRemoved(c net.Conn, from uint64, log *slog.Logger) error {
	log.Info("told a removed member that it was removed", "remote", c.RemoteAddr().String())
	if err := c.SetWriteDeadline(time.Now().Add(writeTimeout)); err == nil {
		_, _ = c.Write([]byte(removedNotice))
	}
	return errPeerRemoved
}

// readFrame reads one length-prefixed Envelope. buf is reused between
// calls, except for large frames, and the Envelope's messages alias it:
// deliver decodes them (copying what it keeps) before the next call.
func readFrame(r *bufio.Reader, buf *[]byte) (*transportpb.Envelope, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxMessageBytes {
		return nil, fmt.Errorf("a frame of %d bytes is over the limit of %d", n, MaxMessageBytes)
	}
	b := *buf
	if uint32(cap(b)) < n {
		b = make([]byte, n)
		if n <= 4*MaxEnvelopeBytes {
			*buf = b
		}
	}
	b = b[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	env, err := decodeEnvelope(b)
	if err != nil {
		return nil, fmt.Errorf("undecodable frame: %w", err)
	}
	return env, nil
}

// register records hello and makes c the connection that delivers for
// peer id, retiring (and closing) the previous one.
func (t *Transport) register(id uint64, hello *transportpb.Hello, c net.Conn) *inbound {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.info[id] = peerInfo{name: hello.GetName(), clientAddr: hello.GetClientAddr(), logVersion: max(hello.GetLogVersion(), 1)}
	in := &inbound{mu: new(sync.Mutex), conn: c}
	if old := t.inbound[id]; old != nil {
		in.mu = old.mu
		old.mu.Lock()
		old.superseded = true
		old.mu.Unlock()
		old.conn.Close()
	}
	t.inbound[id] = in
	return in
}

// deliver hands env's messages to the Handler in order. It reports false
// when the connection has been superseded.
func (t *Transport) deliver(in *inbound, from uint64, env *transportpb.Envelope, log *slog.Logger) bool {
	group := env.GetGroupId()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.superseded {
		return false
	}
	for _, b := range env.GetMessages() {
		m, err := decodeMessage(b)
		if err != nil {
			log.Warn("dropped undecodable message", "err", err)
			continue
		}
		if m.GetFrom() != from || m.GetTo() != t.cfg.ID {
			log.Warn("dropped misaddressed message", "from", m.GetFrom(), "to", m.GetTo())
			continue
		}
		t.h.Receive(group, m)
	}
	return true
}
