package fence

import (
	"context"
	"errors"
	"net/http"
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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, ok, err := ParseClaim(r.Header.Values(LockHeader), r.Header.Values(TokenHeader))
			switch {
			case err != nil:
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			case !ok && unfenced == RefuseUnfenced:
				http.Error(w, ErrNoToken.Error()+" (headers "+LockHeader+" and "+TokenHeader+")", http.StatusPreconditionRequired)
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

// SetHeaders sets h's LockHeader and TokenHeader to holder's lock and
// token, replacing any there.
func SetHeaders(h http.Header, holder Holder) {
	lock, token := ClaimOf(holder).Values()
	h.Set(LockHeader, lock)
	h.Set(TokenHeader, token)
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
