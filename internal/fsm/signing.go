package fsm

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Signing keys (signed tokens, fence.SignToken). A cluster whose members
// run with signed tokens signs every grant it answers with its current
// Ed25519 key, so that a resource can verify the grant with the public
// keys alone (GET /v1/keys) and no call to Baton. The keys live here, in
// the replicated state, so that every member signs with the same key and
// serves the same public keys, before and after a leader change, a
// restart or a snapshot.
//
// The state machine keeps each key's seed and never derives anything from
// it: deriving needs crypto/ed25519, which this package may not import
// (it draws in math/rand), and it is the signer's business. A rotation
// (RotateSigningKey) retires the current key at its entry's wall clock;
// the retired key still verifies for the retention the rotation states,
// and is dropped by the first rotation after that. Wall clocks decide
// nothing here that a member could disagree on: every member drops the
// same keys at the same entry, whose wall clock the leader stamped.
//
// A seed is a secret. It leaves the machine only through SigningSeed (for
// the member's own signer) and the snapshot's bytes: no read API, audit
// record, result or error names it.

// SigningKeySeedLen is the length of an Ed25519 seed (ed25519.SeedSize).
const SigningKeySeedLen = 32

// MaxSigningKeys bounds the keys a cluster keeps (the current one and
// those retired whose retention has not ended): they are in every
// snapshot and every GET /v1/keys. A rotation beyond it drops the oldest
// retired keys at once, whatever their retention: a token they signed
// stops verifying early, which fails safe.
const MaxSigningKeys = 8

// SignedTokensVersion is the log version that added signing keys: below
// it no key can be made, and a member signs nothing.
const SignedTokensVersion = 6

// signingKey is one key as the state keeps it. Its fields never change
// once it is retired; a rotation builds a new list.
type signingKey struct {
	id        uint64 // the entry that made it
	seed      string // SigningKeySeedLen bytes
	created   int64  // its entry's wall clock
	retired   int64  // the retiring rotation's wall clock; 0 while current
	retention int64  // how long after retired it still verifies
}

// SigningKeyInfo describes one signing key, without its seed.
type SigningKeyInfo struct {
	ID              uint64
	CreatedUnixNano int64
	// Current is the key grants are signed with; the others are
	// retired, at RetiredUnixNano, and verify until NotAfterUnixNano.
	Current          bool
	RetiredUnixNano  int64
	NotAfterUnixNano int64 // RetiredUnixNano + the retention; 0 for the current key
}

// SigningKeys returns the cluster's signing keys by id, the current one
// last, without their seeds.
func (m *Machine) SigningKeys() []SigningKeyInfo {
	out := make([]SigningKeyInfo, len(m.keys))
	for i, k := range m.keys {
		out[i] = SigningKeyInfo{ID: k.id, CreatedUnixNano: k.created}
		if i == len(m.keys)-1 {
			out[i].Current = true
		} else {
			out[i].RetiredUnixNano, out[i].NotAfterUnixNano = k.retired, k.retired+k.retention
		}
	}
	return out
}

// CurrentSigningKey returns the id of the key grants are signed with;
// ok is false while the cluster has none.
func (m *Machine) CurrentSigningKey() (id uint64, ok bool) {
	if len(m.keys) == 0 {
		return 0, false
	}
	return m.keys[len(m.keys)-1].id, true
}

// SigningSeed returns a copy of the seed of key id, for this member's
// signer and for deriving the public key it serves. The seed is the
// cluster's private key: never show it, log it or send it anywhere.
func (m *Machine) SigningSeed(id uint64) ([]byte, bool) {
	for _, k := range m.keys {
		if k.id == id {
			return []byte(k.seed), true
		}
	}
	return nil, false
}

// rotateSigningKey applies op, made by principal.
func (m *Machine) rotateSigningKey(a *apply, s *session, principal string, op *fsmpb.RotateSigningKey) {
	seed, retention := op.GetSeed(), op.GetRetentionNanos()
	switch {
	case s != nil:
		a.refuse(invalid("rotate_signing_key is an admin's command: session %d cannot send it", s.id))
		return
	case !validSeed(seed):
		// The message names the length only: the seed is a secret.
		a.refuse(invalid("a signing key's seed must be %d bytes, not all zero; this one has %d", SigningKeySeedLen, len(seed)))
		return
	case op.GetFirst() && len(m.keys) > 0:
		a.refuse(invalid("the cluster has a signing key (key %d): a first key applies only while it has none", m.keys[len(m.keys)-1].id))
		return
	}
	if err := refusal(rules.CheckKeyRetentionNanos(retention)); err != nil {
		a.refuse(err)
		return
	}
	// A new list: a frozen state (frozen.go) encoded the old one at its
	// freeze and keeps nothing of it, and SigningKeys' callers got copies.
	keys := make([]signingKey, 0, len(m.keys)+1)
	var retired *signingKey
	for i, k := range m.keys {
		if i == len(m.keys)-1 {
			k.retired, k.retention = a.wall, retention
			retired = &k
		}
		if k.retired+k.retention > a.wall {
			keys = append(keys, k)
		}
	}
	keys = append(keys, signingKey{id: a.index, seed: string(seed), created: a.wall})
	if n := len(keys) - MaxSigningKeys; n > 0 {
		keys = keys[n:]
	}
	m.keys = keys

	action := fmt.Sprintf("made signing key %d the current one", a.index)
	if retired != nil {
		action += fmt.Sprintf("; key %d retired, verifying for %s", retired.id, rules.FormatNanos(retention))
	}
	if op.GetFirst() {
		action = fmt.Sprintf("made the first signing key, key %d", a.index)
	}
	m.audit(a, principal, action)
}

func validSeed(seed []byte) bool {
	if len(seed) != SigningKeySeedLen {
		return false
	}
	for _, b := range seed {
		if b != 0 {
			return true
		}
	}
	return false
}

// signingKeysProto is the keys as the snapshot keeps them, by id.
func (m *Machine) signingKeysProto() []*fsmpb.SigningKey {
	out := make([]*fsmpb.SigningKey, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, &fsmpb.SigningKey{Id: k.id, Seed: []byte(k.seed), CreatedUnixNano: k.created,
			RetiredUnixNano: k.retired, RetentionNanos: k.retention})
	}
	return out
}

// encodeSigningKeys is the snapshot's signing_keys field: nothing for a
// cluster without keys, so its snapshots encode as before version 6.
func (m *Machine) encodeSigningKeys() []byte {
	var b []byte
	for _, k := range m.signingKeysProto() {
		rec, _ := proto.MarshalOptions{Deterministic: true}.Marshal(k)
		b = protofield.AppendPresentBytes(b, snapshotSigningKeys, rec)
	}
	return b
}

// loadSigningKeys restores the snapshot's signing keys, checking what a
// rotation keeps true: ids ascend up to the applied index, seeds are
// seeds, retentions in bounds, at most MaxSigningKeys, and the last key
// (the current one) not retired.
func (m *Machine) loadSigningKeys(data []byte) error {
	var keys []signingKey
	err := eachRecord(data, func(num protowire.Number, _ uint64, rec []byte) error {
		if num != snapshotSigningKeys {
			return nil
		}
		var p fsmpb.SigningKey
		if err := decodeRecord(rec, &p); err != nil {
			return err
		}
		id := p.GetId()
		switch {
		case id == 0 || id > m.applied || len(keys) > 0 && id <= keys[len(keys)-1].id:
			return fmt.Errorf("signing key %d: ids ascend, from 1 up to the applied index %d", id, m.applied)
		case !validSeed(p.GetSeed()):
			return fmt.Errorf("signing key %d: a seed of %d bytes; want %d, not all zero", id, len(p.GetSeed()), SigningKeySeedLen)
		case len(keys) == MaxSigningKeys:
			return fmt.Errorf("more than %d signing keys", MaxSigningKeys)
		}
		if err := rules.CheckKeyRetentionNanos(p.GetRetentionNanos()); err != nil {
			return fmt.Errorf("signing key %d: %w", id, err)
		}
		keys = append(keys, signingKey{id: id, seed: string(p.GetSeed()), created: p.GetCreatedUnixNano(),
			retired: p.GetRetiredUnixNano(), retention: p.GetRetentionNanos()})
		return nil
	})
	if err != nil {
		return err
	}
	if n := len(keys); n > 0 && (keys[n-1].retired != 0 || keys[n-1].retention != 0) {
		return fmt.Errorf("signing key %d, the current one, is retired", keys[n-1].id)
	}
	m.keys = keys
	return nil
}
