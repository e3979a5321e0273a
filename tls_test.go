package baton

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/internal/testpki"
)

// TestTLS: a 3-member cluster with TLS on the client port (client
// certificates required) and between members. A client with a certificate
// of the CA locks and unlocks through a leader change; one without TLS,
// or without a certificate, gets nothing; HTTPS serves the API and a
// plaintext request is refused.
func TestTLS(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	c := startCluster(t, n, func(cfg *embed.Config) {
		cfg.ClientTLS, cfg.PeerTLS = pki.ServerConfig(), pki.PeerConfig()
	})
	lead := c.leader()
	ctx := testCtx(t)

	cl := dial(t, c.addrs((lead+1)%n), WithTLS(pki.ClientConfig(true)))
	s := newSession(t, cl)
	l, err := s.Mutex("tls/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(lead)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after the leader stopped: %v", err)
	}
	if _, err := s.Mutex("tls/y").TryLock(ctx); err != nil {
		t.Fatal(err)
	}

	addr := c.addrs((lead + 1) % n)
	addr = strings.Split(addr, ",")[0]
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if plain, err := Dial(short, addr, WithMaxAttempts(2)); err == nil {
		_, err = plain.NewSession(short)
		plain.Close()
		if err == nil {
			t.Fatal("a plaintext client opened a session on a TLS member")
		}
	}
	if nocert, err := Dial(short, addr, WithTLS(pki.ClientConfig(false)), WithMaxAttempts(2)); err == nil {
		_, err = nocert.NewSession(short)
		nocert.Close()
		if err == nil {
			t.Fatal("a client without a certificate opened a session")
		}
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(true)}, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "leader") {
		t.Fatalf("GET /v1/status over HTTPS: %d %s", resp.StatusCode, body)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Fatalf("plaintext HTTP answered %d", resp.StatusCode)
	}
}
