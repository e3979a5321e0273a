package baton

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed"
	"github.com/batonlock/baton/embed/embedtest"
	"github.com/batonlock/baton/internal/testpki"
)

// TestAuthAdminReadsAndCallsNeedAdmin: with authentication on, a user who
// may lock and read under jobs/ only may not read the users and the audit
// (both need read over every name) nor move the leader's office (admin
// over every name); root may.
func TestAuthAdminReadsAndCallsNeedAdmin(t *testing.T) {
	addr, _, aliceTok, root := authCluster(t)
	ctx := testCtx(t)
	alice := dial(t, addr, WithToken(aliceTok))

	if _, err := alice.GetAuth(ctx); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("alice's GetAuth: %v, want ErrPermissionDenied", err)
	}
	if _, err := alice.Audit(ctx); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("alice's Audit: %v, want ErrPermissionDenied", err)
	}
	if _, err := alice.TransferLeadership(ctx, ""); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("alice's TransferLeadership: %v, want ErrPermissionDenied", err)
	}
	if _, err := root.GetAuth(ctx); err != nil {
		t.Errorf("root's GetAuth: %v", err)
	}
	if _, err := root.Audit(ctx); err != nil {
		t.Errorf("root's Audit: %v", err)
	}
}

// TestAuthReadsNeedReadPermission: with authentication on, a user who may
// read under jobs/ only may check, read the history of and watch a lock
// there, and none of them of a lock elsewhere.
func TestAuthReadsNeedReadPermission(t *testing.T) {
	addr, _, aliceTok, _ := authCluster(t)
	ctx := testCtx(t)
	alice := dial(t, addr, WithToken(aliceTok))
	for _, tt := range []struct {
		name    string
		allowed bool
	}{{"jobs/1", true}, {"billing/1", false}} {
		reads := map[string]error{}
		_, reads["Check"] = alice.Check(ctx, tt.name, 1)
		_, reads["History"] = alice.History(ctx, tt.name)
		wctx, cancel := context.WithCancel(ctx)
		_, reads["Watch"] = alice.Watch(wctx, tt.name)
		cancel()
		for what, err := range reads {
			switch {
			case tt.allowed && err != nil:
				t.Errorf("alice's %s of %s: %v", what, tt.name, err)
			case !tt.allowed && !errors.Is(err, ErrPermissionDenied):
				t.Errorf("alice's %s of %s: %v, want ErrPermissionDenied", what, tt.name, err)
			}
		}
	}
}

// TestAuthWatchEndsWhenReadIsRevoked: a watch that is open when its
// user loses read over the lock ends (the channel closes, without
// waiting for the lock to change), and shows no state after the change;
// another user's watch of the same lock goes on.
func TestAuthWatchEndsWhenReadIsRevoked(t *testing.T) {
	addr, _, aliceTok, root := authCluster(t)
	ctx := testCtx(t)
	alice := dial(t, addr, WithToken(aliceTok))
	events, err := alice.Watch(ctx, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	rootEvents, err := root.Watch(ctx, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan LockEvent{events, rootEvents} {
		if ev := <-ch; len(ev.Lock.Holders) != 0 {
			t.Fatalf("first event: %+v, want jobs/1 free", ev)
		}
	}
	if err := root.RevokeRole(ctx, "alice", "jobs"); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		t.Errorf("alice's watch showed %+v after she lost read over jobs/1", ev)
	}
	if ctx.Err() != nil {
		t.Fatalf("alice's watch went on after she lost read over jobs/1, until the test's context ended")
	}
	if _, err := newSession(t, root).Mutex("jobs/1").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ev, ok := <-rootEvents; !ok || len(ev.Lock.Holders) != 1 {
		t.Fatalf("root's watch after alice's ended: %+v (open %v), want jobs/1 held", ev, ok)
	}
}

// TestAuthKeepAliveAndRenewalNeedACredential: with authentication on, a
// keepalive and a hold's renewal that show the session's secret but no
// credential are UNAUTHENTICATED, like every other request; with the
// session's user's token they are accepted.
func TestAuthKeepAliveAndRenewalNeedACredential(t *testing.T) {
	addr, _, aliceTok, _ := authCluster(t)
	ctx := testCtx(t)
	alice := dial(t, addr, WithToken(aliceTok))
	s := newSession(t, alice)
	lease, err := s.Mutex("jobs/1", WithHoldLimit(time.Minute), WithManualRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}

	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := batonpb.NewBatonClient(cc)
	call := func(ctx context.Context) (keepAlive, renewal error) {
		_, keepAlive = api.KeepAlive(ctx, &batonpb.KeepAliveRequest{SessionId: s.ID(), Secret: s.Secret()})
		_, renewal = api.RenewHold(ctx, &batonpb.RenewHoldRequest{SessionId: s.ID(), Secret: s.Secret(), Name: "jobs/1", Token: lease.Token()})
		return keepAlive, renewal
	}
	ka, rh := call(ctx)
	if status.Code(ka) != codes.Unauthenticated {
		t.Errorf("a keepalive without a credential: %v, want UNAUTHENTICATED", ka)
	}
	if status.Code(rh) != codes.Unauthenticated {
		t.Errorf("a renewal without a credential: %v, want UNAUTHENTICATED", rh)
	}
	ka, rh = call(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+aliceTok))
	if ka != nil || rh != nil {
		t.Errorf("alice's keepalive and renewal: %v, %v", ka, rh)
	}
}

// TestAuthByClientCertificate: with authentication on, a verified client
// certificate whose common name is a user's authenticates as that user,
// who may do what that user may and nothing else; one whose common name
// names no user is UNAUTHENTICATED, though the member's TLS admits it.
func TestAuthByClientCertificate(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.ClientTLS = pki.ServerConfig() }))
	addr := c.ClientAddr(0)
	ctx := testCtx(t)
	// "baton client" is the common name of pki's client certificate; the
	// operator's certificate names no user.
	const user = "baton client"
	admin := dial(t, addr, WithTLS(pki.ClientConfig(true)))
	rootTok, err := admin.AddUser(ctx, "root", true)
	if err == nil {
		err = admin.GrantRole(ctx, "root", "root")
	}
	if err == nil {
		err = admin.AddRole(ctx, "jobs")
	}
	if err == nil {
		err = admin.Grant(ctx, "jobs", "jobs/", "lock,read")
	}
	if err == nil {
		_, err = admin.AddUser(ctx, user, false)
	}
	if err == nil {
		err = admin.GrantRole(ctx, user, "jobs")
	}
	if err == nil {
		err = admin.EnableAuth(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}

	byCert := dial(t, addr, WithTLS(pki.ClientConfig(true)))
	s := newSession(t, byCert)
	if _, err := s.Mutex("jobs/1").Lock(ctx); err != nil {
		t.Fatalf("a lock under jobs/ by %q's certificate: %v", user, err)
	}
	if _, err := s.Mutex("billing/1").TryLock(ctx); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("a lock of billing/1 by %q's certificate: %v, want ErrPermissionDenied", user, err)
	}
	// A bearer token names its user whatever certificate came with it.
	root := dial(t, addr, WithTLS(pki.ClientConfig(true)), WithToken(rootTok))
	if st, err := root.GetAuth(ctx); err != nil || st.You != "root" {
		t.Errorf("root's GetAuth over TLS: %+v, %v", st, err)
	}

	if cl, err := Dial(ctx, addr, WithTLS(pki.OperatorConfig()), WithMaxAttempts(1)); !errors.Is(err, ErrUnauthenticated) {
		if err == nil {
			cl.Close()
		}
		t.Errorf("Dial with a certificate naming no user: %v, want ErrUnauthenticated", err)
	}
}

// TestAuthIgnoresAnUnverifiedCertificate: a member whose TLS asks for
// client certificates without verifying them (tls.RequestClientCert)
// authenticates nobody by one: a self-signed certificate whose common
// name is root's is UNAUTHENTICATED, while root's bearer token works.
func TestAuthIgnoresAnUnverifiedCertificate(t *testing.T) {
	pki, err := testpki.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	asks := pki.ServerConfig()
	asks.ClientAuth = tls.RequestClientCert
	c := startCluster(t, 1, embedtest.Configure(func(_ int, cfg *embed.Config) { cfg.ClientTLS = asks }))
	addr := c.ClientAddr(0)
	ctx := testCtx(t)
	admin := dial(t, addr, WithTLS(pki.ClientConfig(false)))
	rootTok, err := admin.AddUser(ctx, "root", true)
	if err == nil {
		err = admin.GrantRole(ctx, "root", "root")
	}
	if err == nil {
		err = admin.EnableAuth(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}

	// Shown whatever CAs the member says it accepts.
	forged := pki.ClientConfig(false)
	cert := selfSigned(t, "root")
	forged.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	if cl, err := Dial(ctx, addr, WithTLS(forged), WithMaxAttempts(1)); !errors.Is(err, ErrUnauthenticated) {
		if err == nil {
			cl.Close()
		}
		t.Errorf("Dial with a self-signed certificate naming root: %v, want ErrUnauthenticated", err)
	}
	root := dial(t, addr, WithTLS(pki.ClientConfig(false)), WithToken(rootTok))
	if st, err := root.GetAuth(ctx); err != nil || st.You != "root" {
		t.Errorf("root's GetAuth: %+v, %v", st, err)
	}
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
