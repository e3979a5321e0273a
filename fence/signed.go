package fence

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Signed tokens. A cluster started with signed tokens (baton server
// --signed-tokens) hands out, with every grant, a token signed with
// Ed25519 by a key it keeps in its replicated state: the lock, the
// fencing token, the holding session, the mode, when it was granted and
// the hold's limit. A resource owner verifies it with the cluster's public
// keys (GET /v1/keys, `baton keys`) and no call to Baton: the claim cannot
// be forged or altered by the client that shows it, nor by anything
// between them.
//
// The text form is one base64url string (no padding) of the claims and
// then the 64-byte signature; the signature covers SignedTokenContext
// followed by the claims' bytes, so it means nothing in any other
// protocol.

// SignedTokenHeader carries a signed token on an HTTP request (and, in
// lower case, as gRPC metadata).
const SignedTokenHeader = "Baton-Signed-Token"

// SignedTokenContext is the domain separation prefix of what a signed
// token's signature covers.
const SignedTokenContext = "baton signed token v1\x00"

const signedTokenVersion = 1

// Mode is the kind of hold a signed token names.
type Mode uint8

const (
	Exclusive Mode = iota // a mutex, a write lock, a semaphore's exclusive hold
	Shared                // a read lock, a semaphore's permit
)

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// Claims are what a signed token says.
type Claims struct {
	KeyID     uint64 // the key that signed it
	Lock      string
	Token     uint64 // the fencing token
	Session   uint64 // the holding session
	Mode      Mode
	Issued    time.Time     // when the grant applied (the leader's clock)
	HoldLimit time.Duration // the hold's limit when granted; 0: none
}

// Claim is the lock and fencing token of c, for a Guard.
func (c Claims) Claim() Claim { return Claim{Lock: c.Lock, Token: c.Token} }

// ErrBadSignature: the token does not verify with the key it names (it
// was altered, or signed by another key).
var ErrBadSignature = errors.New("fence: signed token: bad signature")

// ErrUnknownKey: the token names a key the KeySet does not have.
var ErrUnknownKey = errors.New("fence: signed token: unknown key")

// ErrKeyRetired: the token's key was rotated out and its retention ended.
var ErrKeyRetired = errors.New("fence: signed token: key retired")

// AppendClaims appends the encoding of c (what the signature covers,
// after SignedTokenContext).
func AppendClaims(b []byte, c Claims) []byte {
	b = append(b, signedTokenVersion)
	b = binary.AppendUvarint(b, c.KeyID)
	b = binary.AppendUvarint(b, uint64(len(c.Lock)))
	b = append(b, c.Lock...)
	b = binary.AppendUvarint(b, c.Token)
	b = binary.AppendUvarint(b, c.Session)
	b = append(b, byte(c.Mode))
	b = binary.AppendVarint(b, c.Issued.UnixNano())
	return binary.AppendUvarint(b, uint64(max(c.HoldLimit, 0)))
}

// SignToken signs c with priv, the key c.KeyID names, and returns the
// token's text form.
func SignToken(priv ed25519.PrivateKey, c Claims) string {
	claims := AppendClaims(nil, c)
	sig := ed25519.Sign(priv, append([]byte(SignedTokenContext), claims...))
	return base64.RawURLEncoding.EncodeToString(append(claims, sig...))
}

// ParseSignedToken decodes a signed token's text form without verifying
// it: its claims, and what the signature covers.
func ParseSignedToken(s string) (c Claims, signed, sig []byte, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Claims{}, nil, nil, fmt.Errorf("%w: signed token is not base64url: %v", ErrMalformed, err)
	}
	if len(raw) < ed25519.SignatureSize+1 {
		return Claims{}, nil, nil, fmt.Errorf("%w: signed token of %d bytes is too short", ErrMalformed, len(raw))
	}
	claims, sig := raw[:len(raw)-ed25519.SignatureSize], raw[len(raw)-ed25519.SignatureSize:]
	c, err = decodeClaims(claims)
	if err != nil {
		return Claims{}, nil, nil, err
	}
	return c, append([]byte(SignedTokenContext), claims...), sig, nil
}

func decodeClaims(b []byte) (Claims, error) {
	c, err := decodeClaimFields(b)
	if err == nil && string(AppendClaims(nil, c)) != string(b) {
		// One encoding per claims: a varint padded with zero groups is
		// refused rather than read as the same value.
		err = fmt.Errorf("%w: signed token: claims not in canonical form", ErrMalformed)
	}
	return c, err
}

func decodeClaimFields(b []byte) (Claims, error) {
	bad := func(what string) (Claims, error) {
		return Claims{}, fmt.Errorf("%w: signed token: %s", ErrMalformed, what)
	}
	if b[0] != signedTokenVersion {
		return bad(fmt.Sprintf("version %d, want %d", b[0], signedTokenVersion))
	}
	b = b[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var c Claims
	var ok bool
	if c.KeyID, ok = uv(); !ok {
		return bad("key id")
	}
	n, ok := uv()
	if !ok || n > uint64(len(b)) {
		return bad("lock name")
	}
	c.Lock, b = string(b[:n]), b[n:]
	if c.Token, ok = uv(); !ok || c.Token == 0 {
		return bad("fencing token")
	}
	if c.Session, ok = uv(); !ok {
		return bad("session")
	}
	if len(b) == 0 || b[0] > byte(Shared) {
		return bad("mode")
	}
	c.Mode, b = Mode(b[0]), b[1:]
	issued, k := binary.Varint(b)
	if k <= 0 {
		return bad("issue time")
	}
	c.Issued, b = time.Unix(0, issued), b[k:]
	limit, ok := uv()
	if !ok || limit > 1<<62 {
		return bad("hold limit")
	}
	c.HoldLimit = time.Duration(limit)
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d bytes after the claims", len(b)))
	}
	return c, nil
}

// PublicKey is one of a cluster's token keys, as a verifier holds it.
type PublicKey struct {
	ID     uint64
	Public ed25519.PublicKey
	// NotAfter is when a key rotated out stops verifying (its rotation
	// plus the retention); zero for a key in use.
	NotAfter time.Time
}

// KeySet is the public keys a verifier trusts: the cluster's current key
// and those rotated out whose retention has not ended.
type KeySet []PublicKey

// Verify checks the signed token s against ks at time now and returns its
// claims: ErrMalformed, ErrUnknownKey, ErrKeyRetired or ErrBadSignature
// (wrapped) otherwise. It says who was granted what; whether the token is
// still the newest for its lock is a Guard's (or the database's) to say.
func (ks KeySet) Verify(s string, now time.Time) (Claims, error) {
	c, signed, sig, err := ParseSignedToken(s)
	if err != nil {
		return Claims{}, err
	}
	for _, k := range ks {
		if k.ID != c.KeyID {
			continue
		}
		if !k.NotAfter.IsZero() && !now.Before(k.NotAfter) {
			return Claims{}, fmt.Errorf("%w: key %d stopped verifying at %s", ErrKeyRetired, k.ID, k.NotAfter.UTC().Format(time.RFC3339))
		}
		if len(k.Public) != ed25519.PublicKeySize || !ed25519.Verify(k.Public, signed, sig) {
			return Claims{}, fmt.Errorf("%w (key %d)", ErrBadSignature, k.ID)
		}
		return c, nil
	}
	return Claims{}, fmt.Errorf("%w: key %d", ErrUnknownKey, c.KeyID)
}
