package transport

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/testpki"
	"github.com/batonlock/baton/internal/transport/transportpb"
)

// peerTLS is member name's peer TLS config from pki.
func peerTLS(t testing.TB, pki *testpki.PKI, name string) *tls.Config {
	t.Helper()
	cfg, err := pki.PeerConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// With TLS, members exchange messages as in plaintext, and a member
// without a certificate of the CA is refused: its messages never arrive.
func TestTLSPeers(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	la, lb := listen(t), listen(t)
	addrA, addrB := la.Addr().String(), lb.Addr().String()
	ca := config(t, 1, map[uint64]string{2: addrB})
	ca.TLS = peerTLS(t, pki, ca.Name)
	cb := config(t, 2, map[uint64]string{1: addrA})
	cb.TLS = peerTLS(t, pki, cb.Name)
	ra, rb := newRecorder(t), newRecorder(t)
	a, err := StartListener(la, ca, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b, err := StartListener(lb, cb, rb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	a.Send(1, []*raftpb.Message{msgApp(1, 2, 7)})
	if got := rb.next(t); got.m.GetIndex() != 7 || got.m.GetFrom() != 1 {
		t.Fatalf("b got %+v", got)
	}
	b.Send(1, []*raftpb.Message{msgApp(2, 1, 8)})
	if got := ra.next(t); got.m.GetIndex() != 8 {
		t.Fatalf("a got %+v", got)
	}

	// A member that dials without a certificate (trusting the CA) is
	// refused at the handshake.
	lc := listen(t)
	cc := config(t, 3, map[uint64]string{2: addrB})
	cc.TLS = pki.ClientConfig(false)
	rc := newRecorder(t)
	c, err := StartListener(lc, cc, rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	c.Send(1, []*raftpb.Message{msgApp(3, 2, 9)})
	if u := rc.nextUnreachable(t); u != (unreachable{1, 2}) {
		t.Fatalf("ReportUnreachable%+v, want {1 2}", u)
	}
	// And one that speaks plaintext to a TLS member: b ends the
	// connection at the handshake.
	raw, err := net.Dial("tcp", addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = raw.Write([]byte(preface + "hello, no TLS here"))
	_ = raw.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := raw.Read(make([]byte, 512)); err == nil {
		// A TLS alert may come first; the connection must end after it.
		if _, err := raw.Read(make([]byte, 512)); err == nil {
			t.Fatal("a TLS member kept a plaintext connection open")
		}
	}
	select {
	case got := <-rb.msgs:
		t.Fatalf("b accepted a message from a peer without a certificate: %+v", got)
	default:
	}
}

// syncBuffer is an io.Writer for a logger that tests read back.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// claim dials addr over TLS with cfg and, as a member would, sends the
// preface, hello and one MsgApp from hello's id to member to at index.
func claim(t *testing.T, addr string, cfg *tls.Config, hello *transportpb.Hello, to, index uint64) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: waitTimeout}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h, err := proto.Marshal(&transportpb.Envelope{Hello: hello})
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(preface), binary.BigEndian.AppendUint32(nil, uint32(len(h)))...)
	b = append(b, h...)
	if b, _, err = appendFrame(b, []queued{{group: 1, m: msgApp(hello.GetId(), to, index)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitRefused fails the test unless the other side closes c within
// waitTimeout without delivering anything to r.
func waitRefused(t *testing.T, c net.Conn, r *recorder) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, c)
		closed <- err
	}()
	select {
	case got := <-r.msgs:
		t.Fatalf("a message reached the Handler: %v", got.m)
	case err := <-closed:
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatal("the connection was kept open")
		}
	}
	select {
	case got := <-r.msgs:
		t.Fatalf("a message reached the Handler: %v", got.m)
	default: // the Hello is checked before any frame is read
	}
}

// With TLS, an inbound connection speaks for the member its Hello claims
// only if its verified certificate names that member (common name or DNS
// name) and the member is one the receiver knows, joining (cluster id 0)
// or not; anything else is closed after the Hello, with one Warn line,
// and its messages never reach the Handler.
func TestTLSClaimMustBeNamed(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hole := listen(t)
	nowhere := hole.Addr().String() // n1's own messages are not the point
	hole.Close()
	const cluster = 111
	var logs syncBuffer
	cfg := config(t, 1, nil)
	cfg.Name = "n1"
	cfg.Peers = map[uint64]Peer{2: {Name: "n2", Addr: nowhere}, 3: {Name: "n3", Addr: nowhere}}
	cfg.TLS = peerTLS(t, pki, "n1")
	cfg.ClusterID = func() uint64 { return cluster }
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := newRecorder(t)
	n1, err := StartListener(listen(t), cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n1.Stop)
	addr := n1.Addr().String()
	issue := func(c testpki.Cert) *tls.Config {
		t.Helper()
		cert, err := pki.Issue(c)
		if err != nil {
			t.Fatal(err)
		}
		return pki.PeerConfigWith(cert)
	}
	n2Cert := peerTLS(t, pki, "n2")
	index := uint64(0)

	refused := []struct {
		name    string
		tls     *tls.Config
		claims  uint64
		cluster uint64
		want    string // the Warn line's claimed member and certificate names
	}{
		{"a certificate naming n9 speaking as n2", peerTLS(t, pki, "n9"), 2, cluster,
			`claimed_name=n2 cert_names="[n9 n9 localhost]"`},
		{"member n3's certificate speaking as n2", peerTLS(t, pki, "n3"), 2, cluster,
			`claimed_name=n2 cert_names="[n3 n3 localhost]"`},
		{"a client certificate speaking as n2", issue(testpki.Cert{CommonName: "client"}), 2, cluster,
			`claimed_name=n2 cert_names=[client]`},
		{"a client certificate speaking as n3", issue(testpki.Cert{CommonName: "client"}), 3, cluster,
			`claimed_name=n3 cert_names=[client]`},
		{"a client certificate joining as n2", issue(testpki.Cert{CommonName: "client"}), 2, 0,
			`claimed_name=n2 cert_names=[client]`},
		{"n4's certificate joining before n1 knows n4", peerTLS(t, pki, "n4"), 4, 0,
			`claimed_name="" cert_names="[n4 n4 localhost]"`},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			index++
			c := claim(t, addr, tc.tls, &transportpb.Hello{Name: "n2", Id: tc.claims, ClusterId: tc.cluster}, 1, index)
			waitRefused(t, c, r)
			remote := fmt.Sprintf("remote=%s peer=%d ", c.LocalAddr(), tc.claims)
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, remote) {
					if !strings.Contains(line, "level=WARN") || !strings.Contains(line, tc.want) {
						t.Fatalf("the refusal was logged as\n%s\nwant a Warn line with %s", line, tc.want)
					}
					return
				}
			}
			t.Fatalf("no line with %q in the log:\n%s", remote, logs.String())
		})
	}

	admitted := []struct {
		name    string
		tls     *tls.Config
		claims  uint64
		cluster uint64
	}{
		{"n2's certificate", n2Cert, 2, cluster},
		{"a certificate naming n2 as a DNS name only", issue(testpki.Cert{CommonName: "someone", DNSNames: []string{"n2"}, Server: true}), 2, cluster},
		{"n2's certificate, not knowing its cluster yet", n2Cert, 2, 0},
	}
	for _, tc := range admitted {
		t.Run("admitted/"+tc.name, func(t *testing.T) {
			index++
			claim(t, addr, tc.tls, &transportpb.Hello{Name: "n2", Id: tc.claims, ClusterId: tc.cluster}, 1, index)
			if got := r.next(t); got.m.GetIndex() != index || got.m.GetFrom() != tc.claims {
				t.Fatalf("got %v, want index %d from %d", got.m, index, tc.claims)
			}
		})
	}

	// Once n1 applied n4's addition (SetPeers), n4 joins.
	n1.SetPeers(map[uint64]Peer{2: {Name: "n2", Addr: nowhere}, 3: {Name: "n3", Addr: nowhere}, 4: {Name: "n4", Addr: nowhere}})
	index++
	claim(t, addr, peerTLS(t, pki, "n4"), &transportpb.Hello{Name: "n4", Id: 4}, 1, index)
	if got := r.next(t); got.m.GetIndex() != index || got.m.GetFrom() != 4 {
		t.Fatalf("got %v from the joining n4, want index %d", got.m, index)
	}
}

// With TLS, a member dialling n2 sends nothing to a server whose
// certificate names n3 (though it is of the CA and valid for the address)
// and reports n2 unreachable.
func TestTLSDialledPeerMustBeNamed(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	impostor := tls.NewListener(listen(t), peerTLS(t, pki, "n3"))
	t.Cleanup(func() { impostor.Close() })
	got := make(chan int, 1)
	go func() {
		c, err := impostor.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
		n, _ := c.Read(make([]byte, 512)) // runs the handshake first
		got <- n
	}()
	cfg := config(t, 1, nil)
	cfg.Name = "n1"
	cfg.Peers = map[uint64]Peer{2: {Name: "n2", Addr: impostor.Addr().String()}}
	cfg.TLS = peerTLS(t, pki, "n1")
	r := newRecorder(t)
	n1, err := StartListener(listen(t), cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n1.Stop)
	n1.Send(1, []*raftpb.Message{msgApp(1, 2, 5)})
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("the server naming n3 read %d bytes from a member dialling n2, want 0", n)
		}
	case <-time.After(waitTimeout):
		t.Fatal("nobody dialled the impostor")
	}
	if u := r.nextUnreachable(t); u != (unreachable{1, 2}) {
		t.Fatalf("ReportUnreachable%+v, want {1 2}", u)
	}
}

// A member whose own certificate does not name it does not start: every
// peer would refuse it.
func TestConfigValidateOwnCertificate(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert := func(c testpki.Cert) *tls.Config {
		t.Helper()
		tc, err := pki.Issue(c)
		if err != nil {
			t.Fatal(err)
		}
		tc.Leaf = nil // as a hand-made tls.Certificate may come
		return pki.PeerConfigWith(tc)
	}
	tests := []struct {
		name    string
		tls     *tls.Config
		wantErr string
	}{
		{"common name", cert(testpki.Cert{CommonName: "n1", Server: true}), ""},
		{"DNS name", cert(testpki.Cert{CommonName: "host-7", DNSNames: []string{"n1"}, Server: true}), ""},
		{"no certificate of its own", pki.ClientConfig(false), ""},
		{"another member's", cert(testpki.Cert{CommonName: "n2", DNSNames: []string{"n2"}, Server: true}), `names ["n2" "n2" "localhost"], not this member "n1"`},
		{"another case", cert(testpki.Cert{CommonName: "N1", Server: true}), `not this member "n1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Name: "n1", ID: 1, TLS: tt.tls}
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// A member whose TLS asks for peer certificates without verifying them
// (tls.RequestClientCert, against the advice of Config.TLS) knows no
// member by an unverified one: a self-signed certificate naming n2 that
// claims to be n2 is refused, and so, unverified too, is n2's own.
func TestTLSUnverifiedCertificateNamesNoMember(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hole := listen(t)
	nowhere := hole.Addr().String()
	hole.Close()
	cfg := config(t, 1, nil)
	cfg.Name = "n1"
	cfg.Peers = map[uint64]Peer{2: {Name: "n2", Addr: nowhere}}
	cfg.TLS = peerTLS(t, pki, "n1")
	cfg.TLS.ClientAuth = tls.RequestClientCert
	r := newRecorder(t)
	n1, err := StartListener(listen(t), cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n1.Stop)
	addr := n1.Addr().String()

	// Shown whatever CAs n1 says it accepts.
	forged := pki.PeerConfigWith(selfSigned(t, "n2"))
	forged.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged.Certificates[0], nil }
	waitRefused(t, claim(t, addr, forged, &transportpb.Hello{Name: "n2", Id: 2}, 1, 1), r)

	waitRefused(t, claim(t, addr, peerTLS(t, pki, "n2"), &transportpb.Hello{Name: "n2", Id: 2}, 1, 2), r)
}

// selfSigned is a certificate naming name that no CA signed.
func selfSigned(t *testing.T, name string) tls.Certificate {
	t.Helper()
	c, err := testpki.SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
