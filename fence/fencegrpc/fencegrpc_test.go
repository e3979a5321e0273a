package fencegrpc

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/batonlock/baton/fence"
)

type lease struct {
	name  string
	token uint64
}

func (l lease) Name() string  { return l.name }
func (l lease) Token() uint64 { return l.token }

// fencedHealth serves the health service behind the unary interceptor on
// a connection in memory, and returns a client of it.
func fencedHealth(t *testing.T, g *fence.Guard, unfenced fence.Unfenced, seen *[]fence.Claim) healthpb.HealthClient {
	t.Helper()
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		UnaryServerInterceptor(g, unfenced),
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if c, ok := fence.ClaimFrom(ctx); ok {
				*seen = append(*seen, c)
			}
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// TestUnaryInterceptorOverGRPC makes real calls with WithToken's metadata
// through the interceptor: the newest holder's calls run, a stale one's is
// refused with FailedPrecondition and an ErrorInfo naming the tokens.
func TestUnaryInterceptorOverGRPC(t *testing.T) {
	g := fence.NewGuard(0)
	var seen []fence.Claim
	client := fencedHealth(t, g, fence.RefuseUnfenced, &seen)
	old, next := lease{"orders/7 ü", 41}, lease{"orders/7 ü", 57}
	for _, step := range []struct {
		l    lease
		want codes.Code
	}{{old, codes.OK}, {next, codes.OK}, {old, codes.FailedPrecondition}, {next, codes.OK}} {
		_, err := client.Check(WithToken(t.Context(), step.l), &healthpb.HealthCheckRequest{})
		if got := status.Code(err); got != step.want {
			t.Fatalf("call with token %d: %v; want %v", step.l.token, err, step.want)
		}
		if step.want == codes.FailedPrecondition {
			info := errorInfo(t, err)
			if info.Reason != ReasonStaleToken || info.Metadata["token"] != "41" || info.Metadata["seen"] != "57" ||
				info.Metadata["lock"] != fence.EscapeLock("orders/7 ü") {
				t.Errorf("stale call's ErrorInfo %v", info)
			}
		}
	}
	if len(seen) != 3 || seen[0] != (fence.Claim{Lock: "orders/7 ü", Token: 41}) || seen[2] != (fence.Claim{Lock: "orders/7 ü", Token: 57}) {
		t.Errorf("handler saw claims %v", seen)
	}
	_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.FailedPrecondition || errorInfo(t, err).Reason != ReasonNoToken {
		t.Errorf("call without a token: %v; want FailedPrecondition, %s", err, ReasonNoToken)
	}
}

func errorInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	t.Fatalf("%v carries no ErrorInfo", err)
	return nil
}

func TestUnaryInterceptorCodes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		unfenced fence.Unfenced
		md       metadata.MD
		want     codes.Code
		reason   string
	}{
		{name: "no claim passes", want: codes.OK},
		{name: "no claim refused", unfenced: fence.RefuseUnfenced, want: codes.FailedPrecondition, reason: ReasonNoToken},
		{name: "newer", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "11"), want: codes.OK},
		{name: "same", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "10"), want: codes.OK},
		{name: "stale", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "9"), want: codes.FailedPrecondition, reason: ReasonStaleToken},
		{name: "token not a number", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "x"), want: codes.InvalidArgument, reason: ReasonMalformed},
		{name: "token zero", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "0"), want: codes.InvalidArgument, reason: ReasonMalformed},
		{name: "no lock", md: metadata.Pairs(TokenKey, "11"), want: codes.InvalidArgument, reason: ReasonMalformed},
		{name: "two tokens", md: metadata.Pairs(LockKey, "jobs/42", TokenKey, "11", TokenKey, "12"), want: codes.InvalidArgument, reason: ReasonMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := fence.NewGuard(0)
			if err := g.Check("jobs/42", 10); err != nil {
				t.Fatal(err)
			}
			ran := false
			ctx := metadata.NewIncomingContext(t.Context(), tt.md)
			_, err := UnaryServerInterceptor(g, tt.unfenced)(ctx, nil, &grpc.UnaryServerInfo{},
				func(context.Context, any) (any, error) { ran = true; return nil, nil })
			if got := status.Code(err); got != tt.want {
				t.Errorf("%v; want %v", err, tt.want)
			}
			if ran != (tt.want == codes.OK) {
				t.Errorf("handler ran: %v", ran)
			}
			if tt.reason != "" && errorInfo(t, err).Reason != tt.reason {
				t.Errorf("reason %s; want %s", errorInfo(t, err).Reason, tt.reason)
			}
		})
	}
}

// stream is a server stream with a context.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stream) Context() context.Context { return s.ctx }

func TestStreamInterceptor(t *testing.T) {
	g := fence.NewGuard(0)
	if err := g.Check("jobs/42", 10); err != nil {
		t.Fatal(err)
	}
	intercept := StreamServerInterceptor(g, fence.RefuseUnfenced)
	open := func(md metadata.MD) (fence.Claim, bool, error) {
		var c fence.Claim
		ran := false
		err := intercept(nil, stream{ctx: metadata.NewIncomingContext(t.Context(), md)}, &grpc.StreamServerInfo{},
			func(_ any, ss grpc.ServerStream) error {
				ran = true
				c, _ = fence.ClaimFrom(ss.Context())
				return nil
			})
		return c, ran, err
	}
	if c, ran, err := open(metadata.Pairs(LockKey, "jobs/42", TokenKey, "12")); err != nil || !ran || c != (fence.Claim{Lock: "jobs/42", Token: 12}) {
		t.Errorf("newer token: ran %v, claim %+v, %v", ran, c, err)
	}
	for _, c := range []struct {
		md   metadata.MD
		want codes.Code
	}{
		{metadata.Pairs(LockKey, "jobs/42", TokenKey, "11"), codes.FailedPrecondition},
		{metadata.Pairs(LockKey, "jobs%zz", TokenKey, "13"), codes.InvalidArgument},
		{nil, codes.FailedPrecondition},
	} {
		if _, ran, err := open(c.md); status.Code(err) != c.want || ran {
			t.Errorf("%v: ran %v, %v; want %v", c.md, ran, err, c.want)
		}
	}
	// The handler's own error passes as it is.
	mine := status.Error(codes.NotFound, "no such order")
	err := intercept(nil, stream{ctx: metadata.NewIncomingContext(t.Context(), metadata.Pairs(LockKey, "jobs/42", TokenKey, "12"))},
		&grpc.StreamServerInfo{}, func(any, grpc.ServerStream) error { return mine })
	if !errors.Is(err, mine) {
		t.Errorf("handler's error became %v", err)
	}
}
