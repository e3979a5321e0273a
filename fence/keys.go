package fence

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FetchKeys reads a cluster's signed-token keys from a member's
// GET /v1/keys (base is its client address as a URL, "http://10.0.0.1:7700"
// or https). hc nil is http.DefaultClient. Keep the set and fetch it again
// now and then (a rotation adds a key; a retired one's retention ends),
// and at once when a token names a key the set lacks (ErrUnknownKey).
// Fetch over TLS, or from a source you trust: whoever answers chooses the
// keys tokens are checked against.
func FetchKeys(ctx context.Context, hc *http.Client, base string) (KeySet, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	u, err := url.JoinPath(strings.TrimSuffix(base, "/"), "/v1/keys")
	if err != nil {
		return nil, fmt.Errorf("fence: keys URL from %q: %w", base, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fence: fetch keys: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fence: fetch keys: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fence: fetch keys: GET %s: %s: %.200s", u, resp.Status, body)
	}
	return ParseKeys(body)
}

// ParseKeys reads the JSON of GET /v1/keys.
func ParseKeys(b []byte) (KeySet, error) {
	var doc struct {
		Keys []struct {
			ID        string `json:"id"`
			PublicKey []byte `json:"public_key"`
			NotAfter  string `json:"not_after_unix_nano"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("fence: keys: %w", err)
	}
	ks := make(KeySet, 0, len(doc.Keys))
	for _, k := range doc.Keys {
		id, err := strconv.ParseUint(k.ID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("fence: keys: id %q: %w", k.ID, err)
		}
		if len(k.PublicKey) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("fence: keys: key %d has %d bytes, want an Ed25519 public key's %d", id, len(k.PublicKey), ed25519.PublicKeySize)
		}
		pk := PublicKey{ID: id, Public: ed25519.PublicKey(k.PublicKey)}
		if k.NotAfter != "" && k.NotAfter != "0" {
			n, err := strconv.ParseInt(k.NotAfter, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("fence: keys: key %d not_after_unix_nano %q: %w", id, k.NotAfter, err)
			}
			pk.NotAfter = time.Unix(0, n)
		}
		ks = append(ks, pk)
	}
	if len(ks) == 0 {
		return nil, errors.New("fence: keys: the cluster has no signing key (is it started with --signed-tokens?)")
	}
	return ks, nil
}
