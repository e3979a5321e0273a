// Package fencegrpc fences a gRPC service with a fence.Guard: server
// interceptors that read the lock and fencing token a call carries in its
// metadata and refuse stale tokens, and the client side that attaches a
// Lease's. It is package fence's HTTP middleware for gRPC, apart so that
// users of fence alone need not import gRPC.
//
// A call's claim is two metadata entries: LockKey, the lock's name escaped
// by fence.EscapeLock, and TokenKey, the token in decimal (the HTTP
// headers' names in lower case, as gRPC metadata keys are).
package fencegrpc

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/fence"
)

// The metadata keys of a call's fencing claim.
const (
	LockKey  = "baton-lock"
	TokenKey = "baton-fencing-token"
)

// The reasons of the errdetails.ErrorInfo a refusal carries, in Domain,
// so that a client tells a stale token from the service's own
// FailedPrecondition without reading the message.
const (
	Domain           = "fence.batonlock.github.com"
	ReasonStaleToken = "STALE_FENCING_TOKEN"     // FailedPrecondition
	ReasonNoToken    = "NO_FENCING_TOKEN"        // FailedPrecondition
	ReasonMalformed  = "MALFORMED_FENCING_CLAIM" // InvalidArgument
)

// WithToken returns ctx with h's claim added to its outgoing metadata:
// make the calls that write under h's lock with it.
func WithToken(ctx context.Context, h fence.Holder) context.Context {
	lock, token := fence.ClaimOf(h).Values()
	return metadata.AppendToOutgoingContext(ctx, LockKey, lock, TokenKey, token)
}

// UnaryServerInterceptor fences each unary call that carries a claim with
// g: the handler runs inside g.Do, with the lock's name as the resource,
// so a stale holder's call is refused and the calls of one lock are
// handled one at a time, in token order. It refuses, without calling the
// handler: a stale token with FailedPrecondition; a malformed claim with
// InvalidArgument; a call without a claim with FailedPrecondition when
// unfenced is fence.RefuseUnfenced (fence.PassUnfenced handles it
// unchecked). The handler finds the claim with fence.ClaimFrom.
func UnaryServerInterceptor(g *fence.Guard, unfenced fence.Unfenced) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		c, ok, err := claimOf(ctx, unfenced)
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}
		var resp any
		err = g.Do(ctx, c.Lock, c.Token, func() error {
			var herr error
			resp, herr = handler(fence.WithClaim(ctx, c), req)
			return herr
		})
		if err != nil {
			return nil, refusal(c, err)
		}
		return resp, nil
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the
// claim is read when the stream opens, and the whole stream is one write
// inside g.Do, so a newer holder's calls to the same lock wait until it
// ends. Keep fenced streams short, or fence each message's write in the
// handler with the Guard instead.
func StreamServerInterceptor(g *fence.Guard, unfenced fence.Unfenced) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		c, ok, err := claimOf(ctx, unfenced)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			return handler(srv, ss)
		}
		err = g.Do(ctx, c.Lock, c.Token, func() error {
			return handler(srv, &claimStream{ss, fence.WithClaim(ctx, c)})
		})
		return refusal(c, err)
	}
}

// claimOf reads the call's claim; err is the status to refuse it with.
func claimOf(ctx context.Context, unfenced fence.Unfenced) (fence.Claim, bool, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c, ok, err := fence.ParseClaim(md.Get(LockKey), md.Get(TokenKey))
	switch {
	case err != nil:
		return c, false, withInfo(codes.InvalidArgument, err.Error(), ReasonMalformed, nil)
	case !ok && unfenced == fence.RefuseUnfenced:
		return c, false, withInfo(codes.FailedPrecondition,
			fence.ErrNoToken.Error()+" (metadata "+LockKey+" and "+TokenKey+")", ReasonNoToken, nil)
	}
	return c, ok, nil
}

// refusal is the status for g.Do's error err: the handler's own errors
// pass as they are.
func refusal(c fence.Claim, err error) error {
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		return withInfo(codes.FailedPrecondition, err.Error(), ReasonStaleToken, map[string]string{
			"lock": fence.EscapeLock(c.Lock), "token": strconv.FormatUint(stale.Token, 10), "seen": strconv.FormatUint(stale.Seen, 10),
		})
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if _, isStatus := status.FromError(err); !isStatus {
			return status.FromContextError(err).Err()
		}
	}
	return err
}

// withInfo is a status with code and msg carrying an ErrorInfo of reason.
func withInfo(code codes.Code, msg, reason string, md map[string]string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}); err == nil {
		st = d
	}
	return st.Err()
}

// claimStream is a server stream whose context carries the claim.
type claimStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *claimStream) Context() context.Context { return s.ctx }
