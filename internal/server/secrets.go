package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"

	"github.com/batonlock/baton/internal/fsm"
)

// Session secrets. A session's id is public (listed, shown as a holder);
// its secret is what proves a request is its owner's. The server never
// keeps a secret: the log and the state keep its SHA-256, and the state
// machine refuses a command whose hash is not its session's (so does the
// liveness tracker for keepalives and renewals, which are not logged).
// A session stream shows the secret once, when it opens or resumes; a
// unary or HTTP request shows it every time.
const (
	// MinSecretLen and MaxSecretLen bound a secret a client chooses: 22
	// base64 characters carry 128 bits.
	MinSecretLen = 22
	MaxSecretLen = 128
	// secretBytes is how many random bytes a secret the server draws has.
	secretBytes = 32
)

// NewSecret draws a session secret: 32 bytes from crypto/rand, base64url.
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkSecret validates a secret a client chose for its session.
func checkSecret(field, secret string) error {
	if n := len(secret); n < MinSecretLen || n > MaxSecretLen {
		return invalidf("%s is %d characters; a session secret has %d to %d (or leave it unset and the server draws one)",
			field, n, MinSecretLen, MaxSecretLen)
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c < 0x21 || c > 0x7e {
			return invalidf("%s has a character that is not printable ASCII at byte %d", field, i)
		}
	}
	return nil
}

// hashSecret is what a request that showed secret proves: its SHA-256, or
// nil for no secret (which only a session without one admits).
func hashSecret(secret string) []byte {
	if secret == "" {
		return nil
	}
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// secretOf is a stream's proof, once its first message showed it.
func secretOf(secret string) fsm.SecretHash {
	if secret == "" {
		return fsm.SecretHash{}
	}
	return sha256.Sum256([]byte(secret))
}
