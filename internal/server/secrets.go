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
// A secret a client chooses is checked by rules.CheckSecret.
const (
	// secretBytes is how many random bytes a secret the server draws has.
	secretBytes = 32
)

// NewSecret draws a session secret: 32 bytes from crypto/rand, base64url.
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashSecret is what a request that showed secret proves: its SHA-256, or
// nil for no secret (which only a session without one admits).
func hashSecret(secret string) []byte {
	h := secretOf(secret)
	return h.Bytes()
}

// secretOf is a stream's proof, once its first message showed it.
func secretOf(secret string) fsm.SecretHash {
	if secret == "" {
		return fsm.SecretHash{}
	}
	return sha256.Sum256([]byte(secret))
}
