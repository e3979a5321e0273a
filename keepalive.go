package baton

// Keepalives and the client's deadline: where the client decides that its
// session, and with it every Lease, is lost. A keepalive goes every TTL/3
// (keepAliveLoop). The answer to one queued at t moves the deadline to
// t + TTL - SafetyMargin(TTL) (extendLocked), which passes before the
// server's own, counted from when the keepalive arrived. When the deadline
// passes unanswered, every Lease is lost and the session is in jeopardy;
// a TTL later, the session is lost (checkDeadline).

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// The client's safety margin. A session stays valid, in the client's
// eyes, until sendTime + TTL - SafetyMargin(TTL), where sendTime is when
// the client queued the newest keepalive that was answered (its monotonic
// reading, taken before the request is even written to the network). The
// server counts its own deadline from when it received that keepalive, so
// the client's deadline is earlier by the network delay plus the margin.
// The margin covers:
//
//   - a difference in clock rate between the client and the leader, up to
//     ClockRateAllowance of the TTL (1%; quartz is off by ~0.01%), but at
//     least MinClockMargin; and
//   - SchedulingAllowance: the time the client may take, once the deadline
//     passes, to notice it (timer and goroutine scheduling, a GC pause) and
//     cancel the Lease contexts.
//
// Clock jumps cannot matter: only monotonic readings are compared.
const (
	ClockRateAllowance  = 0.01
	MinClockMargin      = 50 * time.Millisecond
	SchedulingAllowance = 50 * time.Millisecond
)

// SafetyMargin is the margin the client subtracts from a session of the
// given TTL: max(1% of TTL, 50ms) + 50ms.
func SafetyMargin(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*ClockRateAllowance), MinClockMargin) + SchedulingAllowance
}

// keepaliveState is the session's liveness as the client sees it.
type keepaliveState struct {
	margin time.Duration // SafetyMargin(TTL)
	wake   chan struct{} // the deadline moved: keepAliveLoop re-arms its timer
	// testPaused stops the keepalives (tests of the deadline).
	testPaused atomic.Bool

	// deadline is the client's conservative deadline (a monotonic
	// reading): every Lease is valid until then. Guarded by Session.mu.
	deadline time.Time
}

// keepAliveLoop sends a keepalive every TTL/3 and checks the deadline when
// it passes (and, in jeopardy, when a TTL past it passes).
func (s *Session) keepAliveLoop() {
	ka := time.NewTicker(s.ttl / 3)
	defer ka.Stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		next := s.keepalive.deadline
		if s.life.state == StateJeopardy {
			next = s.keepalive.deadline.Add(s.ttl) // give up a TTL past the deadline
		}
		s.mu.Unlock()
		t.Reset(time.Until(next))
		select {
		case <-s.runCtx.Done():
			return
		case <-ka.C:
			s.sendKeepAlive()
		case <-s.keepalive.wake:
		case <-t.C:
			s.checkDeadline()
		}
	}
}

// sendKeepAlive queues a keepalive on the current stream, noting when:
// its answer counts the deadline from then.
func (s *Session) sendKeepAlive() {
	if s.keepalive.testPaused.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil || s.endedLocked() {
		return // the resume is the keepalive
	}
	c := &call{keepAlive: true, sent: time.Now(), done: make(chan struct{}),
		req: &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_KeepAlive{KeepAlive: &batonpb.KeepAliveRequest{SessionId: s.id}}}}
	s.sendLocked(c)
}

// keepAliveAnsweredLocked takes the answer to keepalive c on stream sc:
// the deadline moves, or the session follows the leader, or it is lost.
func (s *Session) keepAliveAnsweredLocked(sc *streamConn, c *call, resp *batonpb.SessionResponse, err error) {
	if err == nil {
		s.extendLocked(c.sent, s.serverTTL(resp.GetKeepAlive().GetTtl()))
		return
	}
	var e *Error
	errors.As(err, &e)
	switch {
	case errors.Is(err, ErrNotLeader):
		if e.LeaderAddr != "" {
			s.c.setLeader(e.LeaderAddr)
		}
		sc.cancel()
	case errors.Is(err, ErrSessionLost), errors.Is(err, ErrNotFound):
		s.lostLocked(err)
	case errors.Is(err, ErrBlacklisted):
		// The server refuses its keepalives: the session will expire, so
		// it is lost now.
		s.lostLocked(err)
	default:
		s.log.Warn("keepalive failed", "err", err)
	}
}

// extendLocked moves the deadline after a keepalive (or resume) queued at
// sent was answered with ttl. An answer in time after a jeopardy makes the
// session healthy again (StateSafe).
func (s *Session) extendLocked(sent time.Time, ttl time.Duration) {
	nd := sent.Add(ttl - s.keepalive.margin)
	if nd.After(s.keepalive.deadline) {
		s.keepalive.deadline = nd
		poke(s.keepalive.wake)
	}
	if s.life.state == StateJeopardy && time.Now().Before(nd) {
		s.log.Info("session safe again")
		s.setStateLocked(StateHealthy, StateSafe, nil)
	}
}

// checkDeadline is where the client decides its Leases are lost: once the
// deadline passed with no keepalive answered, every Lease is lost
// (ErrJeopardy) and the session is in jeopardy; once a TTL more passed,
// the client gives up and the session is lost.
func (s *Session) checkDeadline() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.life.state == StateHealthy && !now.Before(s.keepalive.deadline):
		s.log.Warn("session in jeopardy: no keepalive answer before the deadline", "late", now.Sub(s.keepalive.deadline))
		s.endEveryLeaseLocked(ErrJeopardy)
		s.setStateLocked(StateJeopardy, StateJeopardy, ErrJeopardy)
	case s.life.state == StateJeopardy && !now.Before(s.keepalive.deadline.Add(s.ttl)):
		s.lostLocked(fmt.Errorf("%w: no answer from the cluster for a TTL (%v) past the deadline", ErrSessionLost, s.ttl))
	}
}

// serverTTL is the TTL the server granted, or the session's own.
func (s *Session) serverTTL(d *durationpb.Duration) time.Duration {
	if d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return s.ttl
}
