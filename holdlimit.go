package baton

// Hold limits: a hold that the server ends a limit after its grant or its
// last renewal, whatever its session does. The client's view of that
// deadline ends the hold's Leases first; the library renews the hold by
// itself unless the caller renews it (WithManualRenewal).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batonlock/baton/api/batonpb"
)

// limitHoldLocked gives l, a new Lease of hold k, the hold's deadline:
// the limit counted from started less the session's margin, or the
// deadline of the hold's other Leases when l re-enters it. With autoRenew
// the library renews the hold from then on.
func (s *Session) limitHoldLocked(l *Lease, k holdKey, limit time.Duration, autoRenew bool, started time.Time) {
	l.holdLimit = limit
	l.holdDeadline = started.Add(limit - s.keepalive.margin)
	if ls := s.leases.holds[k]; len(ls) > 0 && !ls[0].holdDeadline.IsZero() {
		l.holdDeadline = ls[0].holdDeadline // a reentrant Lease of the same hold
	}
	s.armHoldLocked(l)
	l.autoRenew = autoRenew
	if autoRenew && s.leases.renewing[k] != l.token {
		s.leases.renewing[k] = l.token
		s.renewAfterLocked(k, l.token, time.Until(started.Add(limit/3)))
	}
}

// armHoldLocked (re)starts the timer that ends l at its hold deadline.
func (s *Session) armHoldLocked(l *Lease) {
	if l.holdTimer != nil {
		l.holdTimer.Stop()
	}
	deadline := l.holdDeadline
	l.holdTimer = time.AfterFunc(time.Until(deadline), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l.holdDeadline.Equal(deadline) {
			s.endLeaseLocked(l, ErrHoldExpired)
		}
	})
}

// renewHold asks the leader to restart the limit of the hold (name,
// token) and returns when the request was first sent (the server's new
// deadline is at least that plus the limit) and the limit.
func (s *Session) renewHold(ctx context.Context, name string, token uint64) (time.Time, time.Duration, error) {
	req := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_RenewHold{RenewHold: &batonpb.RenewHoldRequest{
		Name: name, Token: token,
	}}}
	if err := ctx.Err(); err != nil {
		return time.Time{}, 0, err
	}
	s.mu.Lock()
	c, err := s.startLocked(req, true)
	s.mu.Unlock()
	if err != nil {
		return time.Time{}, 0, err
	}
	// Not s.do: a renewal the caller stopped waiting for needs no cleanup
	// (answered late, it extended the hold on the server only, which is
	// the safe side), so ctx's end returns at once.
	select {
	case <-c.done:
	case <-ctx.Done():
		return time.Time{}, 0, ctx.Err()
	}
	if c.err != nil {
		return time.Time{}, 0, c.err
	}
	return c.started, c.resp.GetRenewHold().GetHoldLimit().AsDuration(), nil
}

// Renew gives the Lease's hold its full hold limit again (see
// WithHoldLimit), counted from when the renewal is sent; every Lease of the
// same hold follows. It fails with an error matching ErrNotHeld when the
// hold is gone (its limit passed on the server first, or it was released),
// and then the Lease is lost. A Lease without a hold limit cannot be
// renewed: its session keeps it. The library renews holds by itself unless
// WithManualRenewal said otherwise; Renew works on those too.
func (l *Lease) Renew(ctx context.Context) error {
	if l.holdLimit == 0 {
		return fmt.Errorf("%w: the hold of %q has no hold limit to renew", ErrInvalidArgument, l.name)
	}
	s := l.s
	if err := l.Err(); err != nil {
		return err
	}
	k := holdKey{l.name, l.ownerKey}
	started, limit, err := s.renewHold(ctx, l.name, l.token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrNotHeld) {
			s.renewalRefusedLocked(k, l.token, err)
			s.endLeaseLocked(l, fmt.Errorf("%w: renewal refused: %w", ErrHoldExpired, err))
		}
		return err
	}
	s.renewedLocked(k, l.token, started.Add(limit-s.keepalive.margin))
	return l.err
}

// renewedLocked moves the hold deadline of every Lease of the hold (k,
// token) to deadline, if that is later.
func (s *Session) renewedLocked(k holdKey, token uint64, deadline time.Time) {
	for _, x := range s.leases.holds[k] {
		if x.token == token && x.err == nil && deadline.After(x.holdDeadline) {
			x.holdDeadline = deadline
			s.armHoldLocked(x)
		}
	}
}

// renewalRefusedLocked ends the Leases of the hold (k, token): the server
// refused its renewal (err matches ErrNotHeld).
func (s *Session) renewalRefusedLocked(k holdKey, token uint64, err error) {
	for _, x := range s.leases.holds[k] {
		if x.token == token {
			s.endLeaseLocked(x, fmt.Errorf("%w: renewal refused: %w", ErrHoldExpired, err))
		}
	}
}

// renewAfterLocked has the library renew the hold (k, token) after d, and
// again a third of the limit after each renewal, for as long as a Lease of
// the hold that asked for it (autoRenew) is valid. A renewal is sent only
// while the session is healthy; one that fails for any reason but the
// hold's end is tried again soon, until the hold's deadline passes (then
// its Leases are lost, and the server ends the hold).
func (s *Session) renewAfterLocked(k holdKey, token uint64, d time.Duration) {
	time.AfterFunc(max(d, 0), func() { s.autoRenew(k, token) })
}

func (s *Session) autoRenew(k holdKey, token uint64) {
	s.mu.Lock()
	if s.leases.renewing[k] != token {
		s.mu.Unlock()
		return // a newer hold of the same key took over
	}
	var limit time.Duration
	for _, x := range s.leases.holds[k] {
		if x.token == token && x.err == nil && x.autoRenew {
			limit = x.holdLimit
		}
	}
	if limit == 0 || s.endedLocked() {
		delete(s.leases.renewing, k) // released, lost, or all manual
		s.mu.Unlock()
		return
	}
	retry := min(limit/10, time.Second)
	if s.life.state != StateHealthy {
		s.renewAfterLocked(k, token, retry)
		s.mu.Unlock()
		return
	}
	deadline := s.leases.holds[k][0].holdDeadline
	s.mu.Unlock()

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	started, got, err := s.renewHold(ctx, k.name, token)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.renewedLocked(k, token, started.Add(got-s.keepalive.margin))
		s.renewAfterLocked(k, token, time.Until(started.Add(got/3)))
	case errors.Is(err, ErrNotHeld):
		s.renewalRefusedLocked(k, token, err)
		delete(s.leases.renewing, k)
	default:
		// Unavailable, a leader change, the stream down: the next round
		// finds out whether the hold or the session is gone meanwhile.
		s.renewAfterLocked(k, token, retry)
	}
}
