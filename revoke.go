package baton

// Cooperative revocation: an operator asks the holder of a lock to let
// go (Client.RevokeLock); the holder's Leases tell it at once
// (RevokeRequested), and if the hold has not ended when the grace passes,
// the leader ends it, fenced like any end: the Lease is lost with an error
// matching ErrRevoked and ErrNotHeld, Check of its token answers false,
// and the next holder's token is larger.

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
)

// Revocation is a revoke's request that a hold end (Client.RevokeLock).
type Revocation struct {
	Name     string
	OwnerKey string
	Token    uint64
	// Grace is how long the holder had from the revoke to let go, and
	// Deadline when the leader ends the hold unless it is released first:
	// the revoking leader's wall clock plus Grace, for people (a new
	// leader gives the hold its full grace again from its election).
	Grace    time.Duration
	Deadline time.Time
}

// RevokeOption configures Client.Revoke.
type RevokeOption func(*revokeConfig)

type revokeConfig struct {
	grace time.Duration
	token uint64
}

// WithGrace sets how long the holder has to let go before the leader ends
// its hold: rules.MinRevokeGrace .. rules.MaxRevokeGrace (1s .. 1h) in
// whole milliseconds. Default rules.DefaultRevokeGrace (30s): time for a
// command to finish its step and release.
func WithGrace(d time.Duration) RevokeOption {
	return func(c *revokeConfig) { c.grace = d }
}

// WithRevokeToken makes the revoke conditional on the hold the caller saw:
// only the hold with that token is asked (the lock's holders are left
// alone, with ErrTokenMismatch, if none has it). Without it, every holder
// of the lock is asked (each reader of a read/write lock, each permit of
// a semaphore).
func WithRevokeToken(token uint64) RevokeOption {
	return func(c *revokeConfig) { c.token = token }
}

// RevokeLock asks the holders of lock name to let go within the grace
// (WithGrace) and returns the holds asked, each with its deadline. A hold
// already being revoked keeps its first revocation. With authentication
// on it needs admin over the name, as CasRelease does. It returns an error
// matching ErrNotFound if nobody holds the lock, ErrTokenMismatch if
// WithRevokeToken names no hold of it, and ErrInvalidArgument for a bad
// name or grace; nothing changes then. It is retried as CasRelease is
// (asking twice is harmless: the first revocation stands).
func (c *Client) RevokeLock(ctx context.Context, name string, opts ...RevokeOption) ([]Revocation, error) {
	cfg := revokeConfig{grace: rules.DefaultRevokeGrace}
	for _, o := range opts {
		o(&cfg)
	}
	if err := rules.CheckLockName(name); err != nil {
		return nil, invalid(err)
	}
	if err := rules.CheckRevokeGrace(cfg.grace); err != nil {
		return nil, invalid(err)
	}
	var out []Revocation
	err := c.invoke(ctx, retryNotApplied, func(ctx context.Context, bc batonpb.BatonClient) error {
		resp, err := bc.Revoke(ctx, &batonpb.RevokeRequest{Name: name, Token: cfg.token, Grace: durationpb.New(cfg.grace)})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, h := range resp.GetRevoked() {
			r := Revocation{Name: name, OwnerKey: h.GetOwnerKey(), Token: h.GetToken(), Grace: h.GetRevokeGrace().AsDuration()}
			if d := h.GetRevokeDeadline(); d != nil {
				r.Deadline = d.AsTime()
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// RevokeRequested is closed when a revoke (Client.RevokeLock) asked the hold
// to end: finish the step under way, then Release, before the grace
// passes (Revocation says when). The Lease stays valid until then; a
// hold still there at the grace is ended by the leader, and the Lease is
// lost (Lost) with an error matching ErrRevoked. The client learns of a
// revoke when the server pushes it, or, if its stream was down, when it
// resumes.
func (l *Lease) RevokeRequested() <-chan struct{} {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.revokeC == nil {
		l.revokeC = make(chan struct{})
		if l.revocation != nil {
			close(l.revokeC)
		}
	}
	return l.revokeC
}

// Revocation returns the revoke that asked the hold to end, and true, once
// RevokeRequested is closed; false before.
func (l *Lease) Revocation() (Revocation, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.revocation == nil {
		return Revocation{}, false
	}
	return *l.revocation, true
}

// revokeRequestedLocked tells the Leases of the hold r names that a
// revoke asked it to end, and emits an Event; a push about another
// (older) hold, or one already told, changes nothing.
func (s *Session) revokeRequestedLocked(r *batonpb.RevokeRequested) {
	k := holdKey{r.GetName(), r.GetOwnerKey()}
	ls := s.leases.holds[k]
	rev := &Revocation{Name: r.GetName(), OwnerKey: r.GetOwnerKey(), Token: r.GetToken(), Grace: r.GetGrace().AsDuration()}
	if d := r.GetDeadline(); d != nil {
		rev.Deadline = d.AsTime()
	}
	if len(ls) == 0 || ls[0].token < r.GetToken() {
		// A hold whose grant's answer is still to come: its Lease will
		// start revoked (newLease).
		if old := s.leases.revokedEarly[k]; old == nil || old.Token < rev.Token {
			if s.leases.revokedEarly == nil || len(s.leases.revokedEarly) >= maxRevokedEarly {
				s.leases.revokedEarly = make(map[holdKey]*Revocation)
			}
			s.leases.revokedEarly[k] = rev
		}
		return
	}
	if ls[0].token != r.GetToken() || ls[0].revocation != nil {
		return
	}
	for _, l := range ls {
		l.revocation = rev
		if l.revokeC != nil {
			close(l.revokeC)
		}
	}
	s.emitLocked(Event{State: s.life.state, At: time.Now(), Revoked: rev})
}
