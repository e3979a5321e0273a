package fence

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Holder is a holder of a lock with a fencing token: a *baton.Lease has
// both methods, so the client helpers take a Lease without this package
// importing Baton.
type Holder interface {
	Name() string  // the lock's name
	Token() uint64 // the hold's fencing token
}

// The header names of a fenced HTTP request. gRPC carries the same names
// in lower case as metadata keys (package fencegrpc).
const (
	// LockHeader is the name of the lock whose token the request carries,
	// escaped by EscapeLock: the resource a server's Guard checks.
	LockHeader = "Baton-Lock"
	// TokenHeader is the fencing token, in decimal.
	TokenHeader = "Baton-Fencing-Token"
)

// Claim is what a fenced request says: whose lock it writes under, and
// with which token.
type Claim struct {
	Lock  string
	Token uint64
}

// ClaimOf is h's claim.
func ClaimOf(h Holder) Claim { return Claim{Lock: h.Name(), Token: h.Token()} }

// Values is the claim as header or metadata values: the lock escaped by
// EscapeLock, the token in decimal.
func (c Claim) Values() (lock, token string) {
	return EscapeLock(c.Lock), strconv.FormatUint(c.Token, 10)
}

// ParseClaim reads a claim from the values of LockHeader and TokenHeader
// (each nil or absent when the request lacks it). ok is false when the
// request has neither; err matches ErrMalformed when they cannot be read.
func ParseClaim(locks, tokens []string) (c Claim, ok bool, err error) {
	switch {
	case len(locks) == 0 && len(tokens) == 0:
		return Claim{}, false, nil
	case len(locks) != 1 || len(tokens) != 1:
		return Claim{}, false, fmt.Errorf("%w: want one %s and one %s, got %d and %d", ErrMalformed, LockHeader, TokenHeader, len(locks), len(tokens))
	}
	tok, err := strconv.ParseUint(tokens[0], 10, 64)
	if err != nil || tok == 0 || tok > math.MaxInt64 {
		return Claim{}, false, fmt.Errorf("%w: %s %q is not a decimal number from 1 to 2^63-1", ErrMalformed, TokenHeader, tokens[0])
	}
	lock, err := UnescapeLock(locks[0])
	if err != nil {
		return Claim{}, false, err
	}
	return Claim{Lock: lock, Token: tok}, true, nil
}

// EscapeLock escapes a lock name for a header or metadata value, which
// carry printable ASCII only: every byte outside '!'..'~', and '%', as %XX
// (a lock name is UTF-8 and may have spaces). "jobs/42" stays "jobs/42".
func EscapeLock(name string) string {
	var b strings.Builder
	for i := range len(name) {
		c := name[i]
		if c > ' ' && c < 0x7f && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// UnescapeLock undoes EscapeLock. It refuses (ErrMalformed) an empty
// name, a bad escape and bytes EscapeLock would have escaped.
func UnescapeLock(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty %s", ErrMalformed, LockHeader)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+3 > len(s) {
				return "", fmt.Errorf("%w: %s %q has a cut escape", ErrMalformed, LockHeader, s)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("%w: %s %q has a bad escape", ErrMalformed, LockHeader, s)
			}
			b.WriteByte(byte(v))
			i += 2
		case c <= ' ' || c >= 0x7f:
			return "", fmt.Errorf("%w: %s %q has an unescaped byte %#x", ErrMalformed, LockHeader, s, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
