package baton

// The table of Leases: every Lease the session gave out, by hold (lock
// name and owner key), and what ends them: a release, the session's end or
// jeopardy, or the server ending a hold (an operator's CasRelease).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/batonlock/baton/api/batonpb"
)

// Lease is one successful acquire: a hold of a lock by (session, owner
// key), with the hold's fencing token. A reentrant acquire returns another
// Lease of the same hold (same token); each Lease releases one count.
//
// A lock can be lost at any time, and the client cannot always know at
// once. The Lease is the client's conservative view: it is valid until the
// session's deadline (see SafetyMargin), which the client computes so that
// it passes before the server can hand the lock to anyone else. At that
// instant (StateJeopardy), on the session's end, or on Release, the Lease
// is lost for good: Lost is closed and Context is cancelled. Check
// Remaining before starting a step that must finish under the lock, do the
// work under Context, and let storage check Token (fencing): a process can
// pause after any check.
type Lease struct {
	s        *Session
	name     string
	ownerKey string
	token    uint64
	acquire  context.Context // the acquire's ctx, for Context's values
	// lockDelay is the hold's lock-delay as the server answered (0: none).
	lockDelay time.Duration
	// signedToken is the grant signed by the cluster ("" if unsigned).
	signedToken string

	// Guarded by s.mu.
	// Made on first use (most Leases are released without either):
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}

	err      error // why it was lost
	released bool
	// With a hold limit: the client's deadline for the hold (its first
	// acquire's send, or the last renewal's, plus the limit less the
	// session's margin), and the timer that ends the Lease then.
	holdLimit    time.Duration
	holdDeadline time.Time
	holdTimer    *time.Timer
	autoRenew    bool // the library renews the hold (WithHoldLimit)
	// A revoke's request to let go (revoke.go): revokeC is made on first
	// use, and closed once revocation is set.
	revokeC    chan struct{}
	revocation *Revocation
}

// leaseTable is the session's table of Leases. Guarded by Session.mu.
type leaseTable struct {
	holds map[holdKey][]*Lease // unreleased Leases per hold, oldest first
	// renewing is the token of each hold the library renews by itself
	// (a hold limit without WithManualRenewal), while it does
	// (holdlimit.go).
	renewing map[holdKey]uint64
	// serverHolds gathers a resume's SessionHolds until the last one.
	serverHolds map[holdKey]uint64
	// revokedEarly keeps a revoke the session was told of for a hold it
	// has no Lease of yet: the grant's answer is still to come (a retry
	// after a lost answer, answered after the resume listed the hold as
	// being revoked). The Lease that answer makes starts revoked.
	revokedEarly map[holdKey]*Revocation
}

// maxRevokedEarly bounds leaseTable.revokedEarly: one per hold the
// session may be granted, which the server's limits bound; past it the
// oldest knowledge is dropped (the Lease then learns of its revoke only
// from the leader's end of the hold).
const maxRevokedEarly = 1024

// holdKey names a hold within its session: a lock and an owner key.
type holdKey struct{ name, ownerKey string }

// newLease registers a Lease for the hold of name with token that the
// server granted to an acquire with the options cfg. A grant that arrives
// in jeopardy waits until the session is safe again (or ends, or ctx
// ends: then the hold is released in the background).
//
// With a hold limit, the limit counts from started (the acquire's first
// send, or a renewal's); the library renews it unless cfg says
// WithManualRenewal. lockDelay is the hold's lock-delay as the server
// answered; signedToken is the grant's signed token, if the
// cluster signed it.
func (s *Session) newLease(ctx context.Context, name string, token uint64, cfg holdConfig, started time.Time, lockDelay time.Duration, signedToken string) (*Lease, error) {
	ownerKey := cfg.ownerKey
	for {
		s.mu.Lock()
		switch s.life.state {
		case StateHealthy:
			l := &Lease{s: s, name: name, ownerKey: ownerKey, token: token, acquire: ctx, lockDelay: lockDelay, signedToken: signedToken}
			k := holdKey{name, ownerKey}
			if ls := s.leases.holds[k]; len(ls) > 0 && ls[0].token != token {
				// The hold those leases had ended on the server (an
				// operator's CasRelease); this is a new hold.
				for _, old := range ls {
					s.endLeaseLocked(old, ErrNotHeld)
				}
				delete(s.leases.holds, k)
			}
			if cfg.holdLimit > 0 {
				s.limitHoldLocked(l, k, cfg.holdLimit, !cfg.manualRenew, started)
			}
			if ls := s.leases.holds[k]; len(ls) > 0 {
				l.revocation = ls[0].revocation // another count of a hold: its revoke too
			} else if rev := s.leases.revokedEarly[k]; rev != nil && rev.Token >= token {
				if rev.Token == token {
					l.revocation = rev
					s.emitLocked(Event{State: s.life.state, At: time.Now(), Revoked: rev})
				}
				delete(s.leases.revokedEarly, k)
			}
			s.leases.holds[k] = append(s.leases.holds[k], l)
			s.mu.Unlock()
			return l, nil
		case StateExpired, StateClosed:
			err := s.life.err
			s.mu.Unlock()
			return nil, err
		}
		ch := s.life.stateC
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			s.mu.Lock()
			_, _ = s.startLocked(releaseRequest(name, ownerKey, token), true)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// endEveryLeaseLocked marks every Lease of the session lost with cause.
// The table keeps them: Release still asks the server.
func (s *Session) endEveryLeaseLocked(cause error) {
	for _, ls := range s.leases.holds {
		for _, l := range ls {
			s.endLeaseLocked(l, cause)
		}
	}
}

// endLeaseLocked marks l lost with cause.
func (s *Session) endLeaseLocked(l *Lease, cause error) {
	if l.err != nil {
		return
	}
	l.err = cause
	if l.lost != nil {
		close(l.lost)
	}
	if l.cancel != nil {
		l.cancel(cause)
	}
	if l.holdTimer != nil {
		l.holdTimer.Stop()
	}
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.name }

// OwnerKey is the owner key the hold belongs to within the session.
func (l *Lease) OwnerKey() string { return l.ownerKey }

// Session is the session the hold belongs to.
func (l *Lease) Session() *Session { return l.s }

// Token is the hold's fencing token: larger than the token of every earlier
// holder of this lock. Storage that remembers the largest token it has seen
// and refuses smaller ones cannot be written by a holder that lost the lock.
func (l *Lease) Token() uint64 { return l.token }

// LockDelay is the hold's lock-delay (WithLockDelay, or the member's
// default): if the hold ends by the session's expiry or its hold limit,
// the server grants the lock to no one for that long after. The Lease is
// lost (Lost) before the server can end the hold, so work stopped within
// LockDelay of Lost cannot overlap the next holder's. 0: none.
func (l *Lease) LockDelay() time.Duration { return l.lockDelay }

// SignedToken is the grant signed by the cluster, for a resource that
// verifies it offline (package fence: SignedMiddleware, KeySet.Verify)
// with the cluster's public keys: the lock, the fencing token, the
// session, the mode, when and with what hold limit it was granted, none
// of which the client that shows it can alter. "" when the cluster gives
// none (its members run without --signed-tokens). A reentrant acquire's
// Lease has the signed token of its own grant (the same fencing token).
func (l *Lease) SignedToken() string { return l.signedToken }

// Lost is closed when the client can no longer vouch for the hold: the
// session's conservative deadline passed (jeopardy), the session ended,
// the Lease was released, or the server said an operator's CasRelease
// or a revoke's grace ended the hold. Err says which.
func (l *Lease) Lost() <-chan struct{} {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.err != nil {
			close(l.lost)
		}
	}
	return l.lost
}

// Err is nil while the Lease is valid, then ErrJeopardy, an error matching
// ErrSessionLost or ErrSessionClosed, ErrReleased, or an error matching
// ErrNotHeld (the hold ended by a CasRelease; by a revoke's grace, it
// matches ErrRevoked too).
func (l *Lease) Err() error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.err
}

// Context is cancelled, with Err as its cause (context.Cause), when the
// Lease is lost: run the work done under the lock with it. It carries the
// values of the ctx given to the acquire, but not its cancellation or
// deadline: that ctx bounds the wait for the lock, not the hold.
func (l *Lease) Context() context.Context {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.ctx == nil {
		// The Lease outlives the call that acquired it: that ctx may be
		// a short wait deadline, so only its values are kept.
		l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(l.acquire))
		if l.err != nil {
			l.cancel(l.err)
		}
	}
	return l.ctx
}

// Remaining is how long the Lease stays valid, in the client's
// conservative view, unless a keepalive answer extends it: the time left
// before the session's deadline, or 0 once lost.
func (l *Lease) Remaining() time.Duration {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.err != nil {
		return 0
	}
	until := l.s.keepalive.deadline
	if !l.holdDeadline.IsZero() && l.holdDeadline.Before(until) {
		until = l.holdDeadline
	}
	return max(time.Until(until), 0)
}

// Valid reports whether the Lease is valid now (Remaining() > 0).
func (l *Lease) Valid() bool { return l.Remaining() > 0 }

// Release ends this Lease and releases one count of its hold on the server
// (the hold ends at zero and the next waiter gets the lock). The request is
// sent with its sequence number until the server answers, so it takes
// effect exactly once even across leader changes; if ctx ends first,
// Release returns ctx.Err() and the session keeps retrying. Releasing a
// released Lease returns nil; a Lease lost to jeopardy is still released on
// the server. It returns an error matching ErrSessionLost when the session
// ended (its holds are gone already), and ErrNotHeld when the server no
// longer had the hold.
func (l *Lease) Release(ctx context.Context) error {
	s := l.s
	s.mu.Lock()
	c, err := s.releaseLocked(l)
	s.mu.Unlock()
	if c == nil || err != nil {
		return err
	}
	return s.awaitRelease(ctx, c)
}

// releaseLocked starts the release of l; a nil call means nothing to do.
func (s *Session) releaseLocked(l *Lease) (*call, error) {
	if l.released {
		return nil, nil
	}
	l.released = true
	if s.endedLocked() {
		return nil, s.life.err
	}
	k := holdKey{l.name, l.ownerKey}
	ls := s.leases.holds[k]
	if i := slices.Index(ls, l); i >= 0 {
		ls = append(ls[:i:i], ls[i+1:]...)
	}
	if len(ls) == 0 {
		delete(s.leases.holds, k)
	} else {
		s.leases.holds[k] = ls
	}
	s.endLeaseLocked(l, ErrReleased)
	return s.startLocked(releaseRequest(l.name, l.ownerKey, l.token), true)
}

func (s *Session) awaitRelease(ctx context.Context, c *call) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.err != nil && errors.Is(c.err, ErrSessionClosed) {
		return nil
	}
	return c.err
}

// holdLostLocked ends the leases of a hold that the server ended without
// this session asking (an operator's CasRelease): they are lost with an
// error matching ErrNotHeld. Releasing one still asks the server, with its
// token, which answers ErrNotHeld and never touches a newer hold.
func (s *Session) holdLostLocked(h *batonpb.HoldLost) {
	k := holdKey{h.GetName(), h.GetOwnerKey()}
	ls := s.leases.holds[k]
	if len(ls) == 0 || ls[0].token != h.GetToken() {
		return // released meanwhile, or a newer hold
	}
	cause := fmt.Errorf("%w: hold of %s (token %d) ended by the server: an operator's CasRelease, or its hold limit passed", ErrNotHeld, h.GetName(), h.GetToken())
	if ls[0].revocation != nil {
		cause = fmt.Errorf("%w: %w: hold of %s (token %d) ended by the leader when the revoke's grace passed", ErrNotHeld, ErrRevoked, h.GetName(), h.GetToken())
	}
	for _, l := range ls {
		s.endLeaseLocked(l, cause)
	}
	delete(s.leases.holds, k)
}

// serverHoldsLocked takes one message of the holds a resumed session has
// on the server. Once the list is whole, every lease of a hold granted at
// or before its index that is not on it is lost, with an error matching
// ErrNotHeld: the hold ended while the stream was down (an operator's
// CasRelease, whose HoldLost push had nowhere to go). A lease with a
// larger token came from a grant applied after the list was read.
func (s *Session) serverHoldsLocked(h *batonpb.SessionHolds) {
	if s.leases.serverHolds == nil {
		s.leases.serverHolds = make(map[holdKey]uint64, len(h.GetHolds()))
	}
	for _, x := range h.GetHolds() {
		s.leases.serverHolds[holdKey{x.GetName(), x.GetOwnerKey()}] = x.GetToken()
	}
	for _, r := range h.GetRevoking() {
		s.revokeRequestedLocked(r)
	}
	if !h.GetDone() {
		return
	}
	have := s.leases.serverHolds
	s.leases.serverHolds = nil
	for k, ls := range s.leases.holds {
		tok := ls[0].token
		if tok > h.GetIndex() || have[k] == tok {
			continue
		}
		cause := fmt.Errorf("%w: hold of %s (token %d) ended while the session's stream was down", ErrNotHeld, k.name, tok)
		for _, l := range ls {
			s.endLeaseLocked(l, cause)
		}
		delete(s.leases.holds, k)
	}
}
