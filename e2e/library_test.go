package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/embed/embedtest"
)

// The tests of library_*_test.go, leader_loss_test.go, dashboard_test.go
// and stranger_test.go run members in this process (embedtest) and talk
// to them through the Go client, as a program that links both would.
// These helpers repeat the root package's: its tests, inside package
// baton, cannot import a package that imports baton.

// single starts one member, configured by opts, and a client of it.
func single(t *testing.T, opts ...embedtest.Option) (*embedtest.Cluster, *baton.Client) {
	t.Helper()
	skipShort(t)
	c := embedtest.New(t, 1, opts...)
	return c, dial(t, c.Endpoints(0))
}

// dial connects a client to the cluster and closes it at the end.
func dial(t testing.TB, endpoints string, opts ...baton.Option) *baton.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := baton.Dial(ctx, endpoints, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", endpoints, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// newSession opens a session and closes it at the end.
func newSession(t testing.TB, cl *baton.Client, opts ...baton.SessionOption) *baton.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx, opts...)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// testCtx is a ctx that bounds one step of a test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
