package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/batonlock/baton" // moved from the baton package: its names as they were there
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/testpki"
)

// TestTLS: a 3-member cluster with TLS on the client port (client
// certificates required) and between members. A client with a certificate
// of the CA locks and unlocks through a leader change; one without TLS,
// or without a certificate, gets nothing; HTTPS serves the API and a
// plaintext request is refused.
func TestTLS(t *testing.T) {
	skipShort(t)
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	c := embedtest.New(t, n, embedtest.Configure(func(_ int, cfg *embed.Config) {
		cfg.ClientTLS = pki.ServerConfig()
		if cfg.PeerTLS, err = pki.PeerConfig(cfg.Name); err != nil {
			t.Fatal(err)
		}
	}))
	lead := c.WaitLeader()
	ctx := testCtx(t)

	cl := dial(t, c.Endpoints((lead+1)%n), WithTLS(pki.ClientConfig(true)))
	s := newSession(t, cl)
	l, err := s.Mutex("tls/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(lead)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after the leader stopped: %v", err)
	}
	if _, err := s.Mutex("tls/y").TryLock(ctx); err != nil {
		t.Fatal(err)
	}

	addr := c.ClientAddr((lead + 1) % n)
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

// TestOperators: with operators named, only a client whose certificate
// bears one of those names may make operator calls, over gRPC and HTTP;
// another client's get PermissionDenied and change nothing, while its
// sessions and locks work as before.
func TestOperators(t *testing.T) {
	skipShort(t)
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := embedtest.New(t, 1, embedtest.Configure(func(_ int, cfg *embed.Config) {
		cfg.ClientTLS = pki.ServerConfig()
		cfg.Operators = []string{"someone else", testpki.OperatorName}
	}))
	ctx := testCtx(t)
	addr := c.ClientAddr(0)
	app := dial(t, addr, WithTLS(pki.ClientConfig(true)))
	ops := dial(t, addr, WithTLS(pki.OperatorConfig()))

	s := newSession(t, app)
	l, err := s.Mutex("ops/held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func() error{
		"CasRelease": func() error { return app.CasRelease(ctx, "ops/held", s.ID(), l.Token()) },
		"Blacklist":  func() error { return app.Blacklist(ctx, s.ID()) },
		"AddMember": func() error {
			_, _, err := app.AddMember(ctx, "n9", "127.0.0.1:1", true)
			return err
		},
		"PromoteMember": func() error { _, err := app.PromoteMember(ctx, "n9"); return err },
		"RemoveMember":  func() error { _, err := app.RemoveMember(ctx, "n9"); return err },
		// While authentication is off, users and keys are the operators'.
		"AddUser":          func() error { _, err := app.AddUser(ctx, "mallory", true); return err },
		"RevokeLock":       func() error { _, err := app.RevokeLock(ctx, "ops/held"); return err },
		"RotateSigningKey": func() error { _, _, err := app.RotateSigningKey(ctx, time.Hour); return err },
	} {
		err := call()
		if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `"baton client"`) {
			t.Errorf("%s by a client that is no operator: %v; want ErrPermissionDenied naming its certificate", what, err)
		}
	}
	// Nothing changed: the hold is there, the session may go on.
	if held, err := app.Check(ctx, "ops/held", l.Token()); err != nil || !held {
		t.Fatalf("Check after refused operator calls: %v, %v", held, err)
	}
	if st, err := app.Status(ctx); err != nil || len(st.Members) != 1 {
		t.Fatalf("Status: %+v, %v", st, err)
	}

	post := func(cfg *tls.Config, path, body string) int {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
		resp, err := hc.Post("https://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(pki.ClientConfig(true), fmt.Sprintf("/v1/sessions/%d/blacklist", s.ID()), "{}"); code != http.StatusForbidden {
		t.Fatalf("blacklist over HTTP by a client that is no operator: %d, want 403", code)
	}
	if code := post(pki.OperatorConfig(), "/v1/sessions/999999/blacklist", "{}"); code != http.StatusNotFound {
		t.Fatalf("blacklist of an unknown session over HTTP by an operator: %d, want 404", code)
	}

	// The operator may.
	if err := ops.CasRelease(ctx, "ops/held", s.ID(), l.Token()); err != nil {
		t.Fatalf("CasRelease by an operator: %v", err)
	}
	if err := ops.Blacklist(ctx, s.ID()); err != nil {
		t.Fatalf("Blacklist by an operator: %v", err)
	}

	// Operators are known by verified certificates only.
	bad := embed.DefaultConfig()
	bad.DataDir, bad.Operators = t.TempDir(), []string{"x"}
	if err := bad.Validate(); err == nil {
		t.Fatal("operators without client certificates were accepted")
	}
}
