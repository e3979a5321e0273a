package baton

import (
	"context"
	"crypto/ed25519"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// SigningKey is one of the cluster's signed-token keys, its public half:
// what a resource verifies a Lease's SignedToken with (package fence:
// FetchKeys reads the same keys from GET /v1/keys).
type SigningKey struct {
	ID        uint64
	PublicKey ed25519.PublicKey
	Created   time.Time
	// Current: grants are signed with it. Otherwise it was rotated out
	// at Retired and verifies until NotAfter.
	Current  bool
	Retired  time.Time
	NotAfter time.Time
}

// Keys lists the cluster's signed-token keys by id, the current one last:
// none while the cluster has none (its members run without
// --signed-tokens). Any member answers from its own state.
func (c *Client) Keys(ctx context.Context) ([]SigningKey, error) {
	var r *batonpb.KeysResponse
	err := c.invoke(ctx, retryRead, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.Keys(ctx, &batonpb.KeysRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return signingKeysOf(r.GetKeys()), nil
}

// RotateSigningKey makes a new signing key the cluster's current one and
// returns it with every key after the rotation. The key rotated out still
// verifies for retention (0: not at all, for a key whose seed was exposed
// with a member's disk; at most 30 days, rules.MaxKeyRetention); a
// negative retention means the server's default, a day. An operator call:
// with authentication on, it needs admin over every name. It is retried
// only when it surely did not apply (a retry after a broken connection
// may rotate twice, which costs nothing but a key).
func (c *Client) RotateSigningKey(ctx context.Context, retention time.Duration) (current SigningKey, keys []SigningKey, err error) {
	req := &batonpb.RotateSigningKeyRequest{}
	if retention >= 0 {
		if err := rules.CheckKeyRetention(retention); err != nil {
			return SigningKey{}, nil, invalid(err)
		}
		req.Retention = durationpb.New(retention)
	}
	var r *batonpb.RotateSigningKeyResponse
	err = c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		var err error
		r, err = bc.RotateSigningKey(ctx, req)
		return err
	})
	if err != nil {
		return SigningKey{}, nil, err
	}
	keys = signingKeysOf(r.GetKeys())
	for _, k := range keys {
		if k.ID == r.GetKeyId() {
			current = k
		}
	}
	return current, keys, nil
}

func signingKeysOf(ks []*batonpb.SigningKey) []SigningKey {
	out := make([]SigningKey, 0, len(ks))
	for _, k := range ks {
		sk := SigningKey{ID: k.GetId(), PublicKey: ed25519.PublicKey(k.GetPublicKey()), Created: k.GetCreated().AsTime(), Current: k.GetCurrent()}
		if !k.GetCurrent() {
			sk.Retired = k.GetRetired().AsTime()
			sk.NotAfter = time.Unix(0, k.GetNotAfterUnixNano())
		}
		out = append(out, sk)
	}
	return out
}
