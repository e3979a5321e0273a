package baton

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/embed/embedtest"
)

// TestDialRefused: when every endpoint refuses the connection, Dial says
// so at once, naming them, instead of retrying for its ctx; one endpoint
// that answers is enough; and a failure other than a refusal (a member
// that never answers) is still retried until ctx ends.
func TestDialRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := embedtest.NewNetwork()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		for _, eps := range [][]string{{"127.0.0.1:9"}, {"127.0.0.1:9", "127.0.0.1:10"}} {
			start := time.Now()
			cl, err := Dial(ctx, strings.Join(eps, ","), WithDialer(network.Dial))
			if err == nil {
				cl.Close()
				t.Fatalf("Dial %v with nothing listening succeeded", eps)
			}
			re, ok := errors.AsType[*RefusedError](err)
			if !ok || !slices.Equal(re.Addrs, eps) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Dial %v with nothing listening: %v; want a *RefusedError naming %v that matches ErrUnavailable", eps, err, eps)
			}
			if took := time.Since(start); took > 100*time.Millisecond {
				t.Errorf("Dial %v took %v to find nothing listening; want at once", eps, took)
			}
		}
		if got, want := (&RefusedError{Addrs: []string{"127.0.0.1:7799"}}).Error(), "baton: no member listens at 127.0.0.1:7799 (connection refused)"; got != want {
			t.Errorf("RefusedError = %q; want %q", got, want)
		}

		// A member that answers, after one that refuses.
		ln, err := network.Listen("")
		if err != nil {
			t.Fatal(err)
		}
		cl := serveFakeOn(t, &fakeMember{}, ln, WithDialer(network.Dial))
		cl.Close()
		if cl, err = Dial(ctx, "127.0.0.1:9,"+ln.Addr().String(), WithDialer(network.Dial), WithGRPCSessionStreams()); err != nil {
			t.Fatalf("Dial with one endpoint refusing and one answering: %v", err)
		}
		cl.Close()

		// A listener that never accepts: not a refusal, so Dial waits for
		// its ctx.
		silent, err := network.Listen("")
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer scancel()
		start := time.Now()
		cl, err = Dial(sctx, silent.Addr().String(), WithDialer(network.Dial))
		if err == nil {
			cl.Close()
			t.Fatal("Dial to a member that never accepts succeeded")
		}
		if _, ok := errors.AsType[*RefusedError](err); ok || time.Since(start) < 3*time.Second {
			t.Fatalf("Dial to a member that never accepts: %v after %v; want to retry until ctx ends (3s)", err, time.Since(start))
		}
	})
}
