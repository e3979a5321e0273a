package fence

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func testKey(t *testing.T, seed byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed)), ed25519.SeedSize)))
	return priv.Public().(ed25519.PublicKey), priv
}

var testClaims = Claims{KeyID: 7, Lock: "jobs/42", Token: 1234, Session: 99, Mode: Shared,
	Issued: time.Unix(1_800_000_000, 123456789), HoldLimit: 30 * time.Second}

func TestSignedTokenRoundTrip(t *testing.T) {
	pub, priv := testKey(t, 0)
	ks := KeySet{{ID: 7, Public: pub}}
	now := testClaims.Issued.Add(time.Second)
	got, err := ks.Verify(SignToken(priv, testClaims), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lock != testClaims.Lock || got.Token != testClaims.Token || got.Session != testClaims.Session ||
		got.Mode != testClaims.Mode || !got.Issued.Equal(testClaims.Issued) || got.HoldLimit != testClaims.HoldLimit || got.KeyID != 7 {
		t.Fatalf("claims %+v, want %+v", got, testClaims)
	}
	if c := got.Claim(); c.Lock != "jobs/42" || c.Token != 1234 {
		t.Fatalf("Claim: %+v", c)
	}
}

// A token altered in any byte, any claim changed, or signed by another
// key fails verification.
func TestSignedTokenTampered(t *testing.T) {
	pub, priv := testKey(t, 0)
	_, other := testKey(t, 1)
	ks := KeySet{{ID: 7, Public: pub}}
	now := testClaims.Issued
	good := SignToken(priv, testClaims)
	// Each claim changed, re-encoded with the original signature.
	for name, change := range map[string]func(*Claims){
		"lock":       func(c *Claims) { c.Lock = "jobs/43" },
		"token":      func(c *Claims) { c.Token++ },
		"session":    func(c *Claims) { c.Session++ },
		"mode":       func(c *Claims) { c.Mode = Exclusive },
		"issued":     func(c *Claims) { c.Issued = c.Issued.Add(time.Nanosecond) },
		"hold limit": func(c *Claims) { c.HoldLimit += time.Second },
	} {
		c := testClaims
		change(&c)
		_, _, sig, _ := ParseSignedToken(good)
		forged := encodeRaw(append(AppendClaims(nil, c), sig...))
		if _, err := ks.Verify(forged, now); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s changed: %v; want ErrBadSignature", name, err)
		}
	}
	// Every byte flipped, one at a time: never verifies.
	raw := decodeRaw(t, good)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		b := append([]byte(nil), raw...)
		b[i] ^= byte(1 + rng.IntN(255))
		if c, err := ks.Verify(encodeRaw(b), now); err == nil {
			t.Fatalf("byte %d altered: verified as %+v", i, c)
		}
	}
	// Signed by a key that is not the one it names.
	if _, err := ks.Verify(SignToken(other, testClaims), now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("signed by another key: %v; want ErrBadSignature", err)
	}
	c := testClaims
	c.KeyID = 8
	if _, err := ks.Verify(SignToken(priv, c), now); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("an unknown key id: %v; want ErrUnknownKey", err)
	}
	for _, bad := range []string{"", "!!", encodeRaw([]byte{1, 2, 3})} {
		if _, err := ks.Verify(bad, now); !errors.Is(err, ErrMalformed) {
			t.Errorf("Verify(%q): %v; want ErrMalformed", bad, err)
		}
	}
}

// A key rotated out verifies until its retention ends, and not after.
func TestSignedTokenRetiredKey(t *testing.T) {
	oldPub, oldPriv := testKey(t, 0)
	newPub, newPriv := testKey(t, 1)
	retired := testClaims.Issued.Add(time.Hour)
	ks := KeySet{{ID: 7, Public: oldPub, NotAfter: retired}, {ID: 8, Public: newPub}}
	old := SignToken(oldPriv, testClaims)
	if _, err := ks.Verify(old, retired.Add(-time.Nanosecond)); err != nil {
		t.Fatalf("old key before its retention ended: %v", err)
	}
	if _, err := ks.Verify(old, retired); !errors.Is(err, ErrKeyRetired) {
		t.Fatalf("old key at its retention's end: %v; want ErrKeyRetired", err)
	}
	c := testClaims
	c.KeyID = 8
	if _, err := ks.Verify(SignToken(newPriv, c), retired.Add(time.Hour)); err != nil {
		t.Fatalf("the current key: %v", err)
	}
}

func FuzzParseSignedToken(f *testing.F) {
	_, priv := testKey(&testing.T{}, 0)
	f.Add(SignToken(priv, testClaims))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, signed, sig, err := ParseSignedToken(s)
		if err != nil {
			return
		}
		if len(sig) != ed25519.SignatureSize || !strings.HasPrefix(string(signed), SignedTokenContext) {
			t.Fatalf("parsed %q with a signature of %d bytes", s, len(sig))
		}
		// What parses re-encodes to the same claims.
		if string(AppendClaims(nil, c)) != string(signed[len(SignedTokenContext):]) {
			t.Fatalf("claims %+v do not re-encode to what was signed", c)
		}
	})
}

func encodeRaw(b []byte) string { return base64RawURL.EncodeToString(b) }

func decodeRaw(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64RawURL.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var base64RawURL = base64.RawURLEncoding
