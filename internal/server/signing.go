package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/fence"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Signed tokens. A member started with Config.SignedTokens signs every
// grant it answers, once the cluster has a signing key (fsm signing.go):
// fence.SignToken over the lock, the fencing token, the session, the mode,
// this member's clock and the hold's limit, with the cluster's current
// key. Leading a cluster of log version 6 or more that has no key, it
// proposes the first one (KeepSigningKey). A member without it signs
// nothing, whatever the cluster holds, so the feature costs nothing where
// it is off; every member of a cluster should be started alike.
//
// Signing is off the Ready loop: an answer or a push of a Sessions stream
// carries what its grant needs signed (reply.sign), and the stream's
// sender signs it before it encodes (sendQueued), so that the loop that
// applies every member's entries never waits for Ed25519; a unary acquire
// signs on its handler's goroutine.

// signingKeys is this member's copy of the cluster's current signing key
// and of the public keys it serves, rebuilt from the state machine after a
// rotation or a snapshot applied (dirty).
type signingKeys struct {
	dirty atomic.Bool
	mu    sync.Mutex
	cur   atomic.Pointer[currentKey] // nil until built, or no key
	built atomic.Bool
	// public caches each key's public half by id: a key's seed never
	// changes, and deriving costs tens of microseconds.
	public map[uint64]ed25519.PublicKey // under mu
	// poke wakes KeepSigningKey (capacity 1).
	poke chan struct{}
}

// currentKey is the key grants are signed with.
type currentKey struct {
	id   uint64
	priv ed25519.PrivateKey
}

// grantMode is what signing a grant needs besides the lock, its fencing
// token and the session: the hold's mode and limit.
type grantMode struct {
	shared    bool
	holdLimit int64
}

// signs reports whether this member signs grants: whether an answer should
// carry what signing needs. Cheap, for the Ready loop.
func (s *Server) signs() bool { return s.cfg.SignedTokens }

// currentSigningKey returns the cluster's current key as this member signs
// with it, or nil when it signs nothing. It may read the state machine:
// never call it on the Ready loop.
func (s *Server) currentSigningKey() *currentKey {
	k := &s.keys
	if !s.signs() {
		return nil
	}
	if k.built.Load() && !k.dirty.Load() {
		return k.cur.Load()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.built.Load() && !k.dirty.Load() {
		return k.cur.Load()
	}
	k.dirty.Store(false)
	var cur *currentKey
	s.node.View(func(m *fsm.Machine) {
		if id, ok := m.CurrentSigningKey(); ok {
			seed, _ := m.SigningSeed(id)
			cur = &currentKey{id: id, priv: ed25519.NewKeyFromSeed(seed)}
		}
	})
	k.cur.Store(cur)
	k.built.Store(true)
	return cur
}

// signGrant is the signed token of a grant of lock with token to session,
// or "" when this member signs nothing.
func (s *Server) signGrant(lock string, token, session uint64, mode grantMode) string {
	key := s.currentSigningKey()
	if key == nil {
		return ""
	}
	c := fence.Claims{KeyID: key.id, Lock: lock, Token: token, Session: session,
		Issued: time.Now(), HoldLimit: time.Duration(mode.holdLimit)}
	if mode.shared {
		c.Mode = fence.Shared
	}
	return fence.SignToken(key.priv, c)
}

// signAcquire signs r, an acquire's answer for session, if it was granted.
func (s *Server) signAcquire(r *batonpb.AcquireResponse, session uint64, mode grantMode) {
	if r.GetAcquired() && r.GetSignedToken() == "" {
		r.SignedToken = s.signGrant(r.GetName(), r.GetToken(), session, mode)
	}
}

// signReply signs the grants r carries (an acquire's answer, a set's, a
// grant pushed), for the stream's sender.
func (s *Server) signReply(r reply) {
	switch k := r.resp.GetKind().(type) {
	case *batonpb.SessionResponse_Acquire:
		s.signAcquire(k.Acquire, r.ch.session, *r.sign)
	case *batonpb.SessionResponse_AcquireMany:
		for _, a := range k.AcquireMany.GetResults() {
			s.signAcquire(a, r.ch.session, *r.sign)
		}
	case *batonpb.SessionResponse_Grant:
		if g := k.Grant; g.GetSignedToken() == "" {
			g.SignedToken = s.signGrant(g.GetName(), g.GetToken(), r.ch.session, *r.sign)
		}
	}
}

// modeOf is the mode and hold limit of the holds cmd, an Acquire or an
// AcquireMany, asks for.
func modeOf(cmd *fsmpb.Command) grantMode {
	if op := cmd.GetAcquire(); op != nil {
		return grantMode{shared: op.GetShared(), holdLimit: op.GetHoldLimitNanos()}
	}
	op := cmd.GetAcquireMany()
	return grantMode{shared: op.GetShared(), holdLimit: op.GetHoldLimitNanos()}
}

// grantModesIn returns grantModeIn for the grants of res. An entry that
// lets in a run of readers with hold limits has as many limited holds as
// grants: past a few, their limits are indexed once, not scanned for each
// grant (the last of equal ones counting, as in the scan).
func grantModesIn(res *fsmpb.Result) func(*fsmpb.Grant) grantMode {
	limited := res.GetLiveness().GetLimitedHoldsGranted()
	if len(limited) < 64 {
		return func(g *fsmpb.Grant) grantMode { return grantModeIn(res, g) }
	}
	type hold struct {
		session, token uint64
		lock           string
	}
	limits := make(map[hold]int64, len(limited))
	for _, h := range limited {
		limits[hold{h.GetSessionId(), h.GetToken(), h.GetLock()}] = h.GetHoldLimitNanos()
	}
	return func(g *fsmpb.Grant) grantMode {
		return grantMode{shared: g.GetShared(), holdLimit: limits[hold{g.GetSessionId(), g.GetToken(), g.GetLock()}]}
	}
}

// grantModeIn is the mode of g, granted by the entry whose result is res:
// a limited hold's limit is in the result's report to the tracker.
func grantModeIn(res *fsmpb.Result, g *fsmpb.Grant) grantMode {
	mode := grantMode{shared: g.GetShared()}
	for _, h := range res.GetLiveness().GetLimitedHoldsGranted() {
		if h.GetSessionId() == g.GetSessionId() && h.GetToken() == g.GetToken() && h.GetLock() == g.GetLock() {
			mode.holdLimit = h.GetHoldLimitNanos()
		}
	}
	return mode
}

// keysChanged marks the signing keys for a rebuild and wakes
// KeepSigningKey: a rotation or a snapshot applied, or the log version was
// raised (the cluster may now need its first key).
func (s *Server) keysChanged() {
	s.keys.dirty.Store(true)
	s.pokeSigningKey()
}

func (s *Server) pokeSigningKey() { poke(s.keys.poke) }

// StartedLeading tells the server that this member leads now: it may have
// to propose the cluster's first signing key.
func (s *Server) StartedLeading() { s.pokeSigningKey() }

// firstKeyRetry is how soon KeepSigningKey tries again after its proposal
// failed (a leader change, a timeout).
const firstKeyRetry = time.Second

// KeepSigningKey runs until ctx ends, when this member signs grants: while
// it leads a cluster of log version fsm.SignedTokensVersion or more that
// has no signing key, it proposes the first one, drawn from crypto/rand.
// The proposal is the leader's own (RotateSigningKey.first): the state
// machine applies it only while the cluster has no key, so two leaders'
// racing proposals make one key.
func (s *Server) KeepSigningKey(ctx context.Context) {
	if !s.signs() {
		return
	}
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.keys.poke:
		case <-retry:
		}
		retry = nil
		if err := s.makeFirstKey(ctx); err != nil {
			s.log.Warn("the cluster's first signing key was not made; trying again", "err", err)
			retry = time.After(firstKeyRetry)
		}
	}
}

// makeFirstKey proposes the cluster's first signing key if this member
// leads a cluster that needs one.
func (s *Server) makeFirstKey(ctx context.Context) error {
	if !s.node.IsLeader() || s.node.LogVersion() < fsm.SignedTokensVersion {
		return nil
	}
	has := false
	s.node.View(func(m *fsm.Machine) { _, has = m.CurrentSigningKey() })
	if has {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	id, err := s.proposeKey(ctx, &fsmpb.RotateSigningKey{First: true}, "")
	switch {
	case isRefusal(err):
		return nil // another leader's first key applied first
	case err != nil:
		return err
	}
	s.log.Info("made the cluster's first signing key", "key_id", id)
	return nil
}

// proposeKey fills op's seed from crypto/rand and proposes it for
// principal; it returns the new key's id (its entry's index). Only ids
// are logged: the seed is the cluster's private key.
func (s *Server) proposeKey(ctx context.Context, op *fsmpb.RotateSigningKey, principal string) (uint64, error) {
	op.Seed = make([]byte, ed25519.SeedSize)
	rand.Read(op.Seed) // never fails (crypto/rand documents it)
	cmd := &fsmpb.Command{Principal: principal, WallTimeUnixNano: time.Now().UnixNano(),
		Op: &fsmpb.Command_RotateSigningKey{RotateSigningKey: op}}
	res, index, err := s.node.Propose(ctx, cmd)
	if err != nil {
		return 0, err
	}
	return index, fsm.ErrorOf(res)
}

// RotateSigningKey implements batonpb.BatonServer.
func (s *Server) RotateSigningKey(ctx context.Context, r *batonpb.RotateSigningKeyRequest) (*batonpb.RotateSigningKeyResponse, error) {
	who, err := s.operator(ctx, "RotateSigningKey")
	if err != nil {
		return nil, s.toStatus(err)
	}
	retention := rules.DefaultKeyRetention
	if d := r.GetRetention(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, s.toStatus(invalidf("retention: %v", err))
		}
		retention = d.AsDuration()
	}
	if err := invalidField("retention", rules.CheckKeyRetention(retention)); err != nil {
		return nil, s.toStatus(err)
	}
	id, err := s.proposeKey(ctx, &fsmpb.RotateSigningKey{RetentionNanos: int64(retention)}, who)
	if err != nil {
		return nil, s.toStatus(err)
	}
	s.log.Info("signing key rotated", "key_id", id, "retention", retention)
	return &batonpb.RotateSigningKeyResponse{KeyId: id, Keys: s.publicKeys()}, nil
}

// Keys implements batonpb.BatonServer: public, answered from this
// member's state.
func (s *Server) Keys(context.Context, *batonpb.KeysRequest) (*batonpb.KeysResponse, error) {
	return &batonpb.KeysResponse{Keys: s.publicKeys()}, nil
}

// publicKeys is the cluster's keys as GET /v1/keys shows them.
func (s *Server) publicKeys() []*batonpb.SigningKey {
	k := &s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.public == nil {
		k.public = map[uint64]ed25519.PublicKey{}
	}
	var out []*batonpb.SigningKey
	s.node.View(func(m *fsm.Machine) {
		for _, info := range m.SigningKeys() {
			pub, ok := k.public[info.ID]
			if !ok {
				seed, _ := m.SigningSeed(info.ID)
				pub = ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
				k.public[info.ID] = pub
			}
			w := &batonpb.SigningKey{Id: info.ID, PublicKey: pub, Created: tsOf(info.CreatedUnixNano), Current: info.Current}
			if !info.Current {
				w.Retired = timestamppb.New(time.Unix(0, info.RetiredUnixNano))
				// Never 0 for a retired key: fence.ParseKeys reads 0 as
				// a key in use.
				w.NotAfterUnixNano = max(info.NotAfterUnixNano, 1)
			}
			out = append(out, w)
		}
	})
	return out
}
