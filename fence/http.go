package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Unfenced says what a fenced server does with a request that carries no
// fencing claim (neither LockHeader nor TokenHeader).
type Unfenced int

const (
	// PassUnfenced serves it unchecked: for a service whose reads, or
	// some of whose writers, are not under a lock.
	PassUnfenced Unfenced = iota
	// RefuseUnfenced refuses it: 428 Precondition Required over HTTP,
	// FailedPrecondition over gRPC, matching ErrNoToken.
	RefuseUnfenced
)

// Middleware returns net/http middleware that fences each request
// carrying a claim (LockHeader and TokenHeader) with g: the handler runs
// inside g.Do, with the lock's name as the resource, so that a stale
// holder's request is refused and the requests of one lock are served one
// at a time, in token order. It answers, without calling the handler:
//
//   - 409 Conflict when the token is stale (a newer holder was seen);
//   - 400 Bad Request when the claim is malformed (ErrMalformed);
//   - 428 Precondition Required for a request without a claim, when
//     unfenced is RefuseUnfenced (PassUnfenced serves it unchecked);
//   - 503 Service Unavailable when the request ended while it waited for
//     the lock's earlier request.
//
// Each refusal's body is the error's text. The handler finds the claim
// with ClaimFrom. Guard only the routes that write under the lock: a
// stale holder's reads are harmless, and serializing them costs.
func Middleware(g *Guard, unfenced Unfenced) func(http.Handler) http.Handler {
	return fenced(g, unfenced, func(r *http.Request) (*http.Request, Claim, bool, int, error) {
		c, ok, err := ParseClaim(r.Header.Values(LockHeader), r.Header.Values(TokenHeader))
		if err != nil {
			return r, Claim{}, false, http.StatusBadRequest, err
		}
		return r, c, ok, 0, nil
	}, LockHeader+" and "+TokenHeader)
}

// SignedMiddleware is Middleware for claims no client can forge: the
// claim is that of the request's signed token (SignedTokenHeader), which
// must verify with keys() (the cluster's, from FetchKeys) at the time of
// the request; a LockHeader the request also carries must name the same
// lock. A request with plain headers only counts as carrying no claim.
// Besides Middleware's answers, it refuses a token that does not verify
// (a bad signature, an unknown or retired key) with 403 Forbidden. The
// handler finds the verified claims with SignedClaimsFrom.
func SignedMiddleware(g *Guard, keys func() KeySet, unfenced Unfenced) func(http.Handler) http.Handler {
	return fenced(g, unfenced, func(r *http.Request) (*http.Request, Claim, bool, int, error) {
		vs := r.Header.Values(SignedTokenHeader)
		switch {
		case len(vs) == 0:
			return r, Claim{}, false, 0, nil
		case len(vs) > 1:
			return r, Claim{}, false, http.StatusBadRequest, fmt.Errorf("%w: %d %s headers", ErrMalformed, len(vs), SignedTokenHeader)
		}
		sc, err := keys().Verify(vs[0], time.Now())
		switch {
		case errors.Is(err, ErrMalformed):
			return r, Claim{}, false, http.StatusBadRequest, err
		case err != nil:
			return r, Claim{}, false, http.StatusForbidden, err
		}
		if ls := r.Header.Values(LockHeader); len(ls) > 0 {
			if l, err := UnescapeLock(ls[0]); err != nil || len(ls) > 1 || l != sc.Lock {
				return r, Claim{}, false, http.StatusBadRequest, fmt.Errorf("%w: %s does not name the signed token's lock %q", ErrMalformed, LockHeader, sc.Lock)
			}
		}
		return r.WithContext(context.WithValue(r.Context(), signedClaimsKey{}, sc)), sc.Claim(), true, 0, nil
	}, SignedTokenHeader)
}

// fenced is the middleware both share: claimOf reads a request's claim
// (ok false: none; a status with err: refused) and returns the request to
// serve.
func fenced(g *Guard, unfenced Unfenced, claimOf func(*http.Request) (*http.Request, Claim, bool, int, error), headers string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, c, ok, code, err := claimOf(r)
			switch {
			case err != nil:
				http.Error(w, err.Error(), code)
				return
			case !ok && unfenced == RefuseUnfenced:
				http.Error(w, ErrNoToken.Error()+" (headers "+headers+")", http.StatusPreconditionRequired)
				return
			case !ok:
				next.ServeHTTP(w, r)
				return
			}
			err = g.Do(r.Context(), c.Lock, c.Token, func() error {
				next.ServeHTTP(w, r.WithContext(WithClaim(r.Context(), c)))
				return nil
			})
			switch {
			case errors.Is(err, ErrStale):
				http.Error(w, err.Error(), http.StatusConflict)
			case err != nil:
				http.Error(w, "fence: waiting for the lock's earlier request: "+err.Error(), http.StatusServiceUnavailable)
			}
		})
	}
}

type signedClaimsKey struct{}

// SignedClaimsFrom is the verified signed token of a request that
// SignedMiddleware admitted.
func SignedClaimsFrom(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(signedClaimsKey{}).(Claims)
	return c, ok
}

type claimKey struct{}

// WithClaim returns a context carrying c, which ClaimFrom reads: what the
// middleware and fencegrpc's interceptors give the handler.
func WithClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFrom is the claim a fenced request carried, if any.
func ClaimFrom(ctx context.Context) (Claim, bool) {
	c, ok := ctx.Value(claimKey{}).(Claim)
	return c, ok
}

// SignedHolder is a Holder whose grant came with a signed token (a
// *baton.Lease from a cluster with signed tokens; "" otherwise).
type SignedHolder interface {
	Holder
	SignedToken() string
}

// SetHeaders sets h's LockHeader and TokenHeader to holder's lock and
// token, and its SignedTokenHeader when holder has a signed token,
// replacing any there.
func SetHeaders(h http.Header, holder Holder) {
	lock, token := ClaimOf(holder).Values()
	h.Set(LockHeader, lock)
	h.Set(TokenHeader, token)
	if sh, ok := holder.(SignedHolder); ok && sh.SignedToken() != "" {
		h.Set(SignedTokenHeader, sh.SignedToken())
	}
}

// Transport is an http.RoundTripper that sends every request with the
// fencing claim of Holder (SetHeaders), for a client that writes to a
// fenced service under one lock:
//
//	hc := &http.Client{Transport: &fence.Transport{Holder: lease}}
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base   http.RoundTripper
	Holder Holder
}

// RoundTrip sends a copy of r with the claim's headers set (r itself is
// not changed, as http.RoundTripper requires).
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	r = r.Clone(r.Context())
	SetHeaders(r.Header, t.Holder)
	return base.RoundTrip(r)
}
