package transport

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/batonlock/baton/internal/testpki"
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
