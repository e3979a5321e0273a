package baton

// Requests and their answers: every request of a session is a call,
// queued on the session's stream with an id (its answer names it) and,
// when it changes something, a sequence number that makes it take effect
// once however often it is sent (after a reconnect, after OVERLOADED).
// handle matches each message from the stream to its call.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
)

// call is one request on the session stream.
type call struct {
	id, seq   uint64
	req       *batonpb.SessionRequest // header is filled in per send
	keepAlive bool
	sent      time.Time // keepalives: when queued
	started   time.Time // when first queued: nothing it asks happened before
	wait      bool      // a waiting acquire: "queued" is not its answer
	name      string
	ownerKey  string
	retries   int

	// Guarded by Session.mu.
	final     bool
	resp      *batonpb.SessionResponse
	err       error
	abandoned bool  // the caller left: release whatever it was granted
	cleanup   *call // the release of an abandoned grant
	done      chan struct{}
}

// requestTable is the session's book of requests. Guarded by Session.mu.
type requestTable struct {
	lastSeq uint64           // the sequence number of the last mutating request
	lastID  uint64           // the id of the last send, on any stream
	byID    map[uint64]*call // sent on the current stream and unanswered, by id
	bySeq   map[uint64]*call // mutating and without a final answer, by seq
}

// do starts a request and waits for its final answer or ctx. On ctx's end
// the request is abandoned (see abandon).
func (s *Session) do(ctx context.Context, req *batonpb.SessionRequest, setup func(c *call)) (*call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, err := s.startLocked(req, true)
	if c != nil && setup != nil {
		setup(c)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-c.done:
		return c, c.err
	case <-ctx.Done():
		s.abandon(c)
		return nil, ctx.Err()
	}
}

// startLocked registers a request and queues it for sending. Mutating
// requests get the next sequence number. A request that cannot be sent
// (see sendable) fails alone, before it has a sequence number or reaches
// the stream.
func (s *Session) startLocked(req *batonpb.SessionRequest, mutating bool) (*call, error) {
	if s.endedLocked() {
		return nil, s.life.err
	}
	if err := sendable(req); err != nil {
		return nil, err
	}
	c := &call{req: req, done: make(chan struct{}), started: time.Now()}
	if mutating {
		s.requests.lastSeq++
		c.seq = s.requests.lastSeq
		s.requests.bySeq[c.seq] = c
	}
	s.sendLocked(c)
	return c, nil
}

// sendLocked queues c on the current stream with a fresh id and header. With
// no stream the reconnect sends it.
func (s *Session) sendLocked(c *call) {
	if s.stream == nil || c.final {
		return
	}
	s.requests.lastID++
	c.id = s.requests.lastID
	s.requests.byID[c.id] = c
	var h *batonpb.RequestHeader // stamp copies it: it stays on the stack
	if c.seq != 0 {
		h = &batonpb.RequestHeader{SessionId: s.id, Seq: c.seq, MinUnackedSeq: s.minUnackedLocked()}
	}
	if err := s.stream.ch.Send(stamp(c.req, c.id, h)); err != nil {
		s.stream.cancel() // the reader reports why; the reconnect resends
	}
}

// resendLocked sends every mutating request without a final answer
// again on the new stream, in the order of their sequence numbers, and
// returns how many: each keeps its number, so each takes effect once
// however many streams carried it.
func (s *Session) resendLocked() int {
	pending := slices.SortedFunc(maps.Values(s.requests.bySeq), func(a, b *call) int { return cmp.Compare(a.seq, b.seq) })
	for _, c := range pending {
		s.sendLocked(c)
	}
	return len(pending)
}

// minUnackedLocked is the lowest sequence number without a final answer.
// A queued acquire counts as unanswered until it is granted or its wait
// ends, so that a retry after a reconnect can still learn its outcome.
func (s *Session) minUnackedLocked() uint64 {
	m := s.requests.lastSeq + 1
	for seq := range s.requests.bySeq {
		m = min(m, seq)
	}
	return m
}

// handle takes one message of stream sc: a push, matched to its acquire
// by sequence number (a grant, the end of a wait) or to the table of
// Leases (a hold ended, the holds after a resume), the session's loss, or
// the answer to a request, matched by id. A failed mutating request the
// server did not apply (not the leader, overloaded) is sent again with
// its sequence number.
func (s *Session) handle(sc *streamConn, resp *batonpb.SessionResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != sc || s.endedLocked() {
		return
	}
	switch k := resp.GetKind().(type) {
	case *batonpb.SessionResponse_Grant:
		c := s.requests.bySeq[k.Grant.GetSeq()]
		if c == nil {
			s.log.Warn("grant for an unknown acquire", "lock", k.Grant.GetName(), "seq", k.Grant.GetSeq(), "token", k.Grant.GetToken())
			return
		}
		s.finishLocked(c, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{Acquire: &batonpb.AcquireResponse{
			Name: k.Grant.GetName(), Acquired: true, Token: k.Grant.GetToken(), Count: 1, Seq: k.Grant.GetSeq(),
			SignedToken: k.Grant.GetSignedToken(),
		}}}, nil)
		return
	case *batonpb.SessionResponse_WaitEnded:
		c := s.requests.bySeq[k.WaitEnded.GetSeq()]
		if c == nil || !c.wait {
			return
		}
		w := k.WaitEnded
		// A wait ended as deadlocked (a grant or a cancel left its key in
		// a cycle) is a *DeadlockError naming the cycle, as a refused
		// acquire is.
		err := deadlockError(&Error{Code: codes.FailedPrecondition, Reason: w.GetReason(), Message: "wait for lock " + w.GetName() + " ended"},
			w.GetDeadlockCycle())
		if w.GetReason() == batonpb.Reason_SESSION_NOT_FOUND || w.GetReason() == batonpb.Reason_SESSION_EXPIRED {
			err = fmt.Errorf("%w: %w", ErrSessionLost, err)
		}
		s.finishLocked(c, nil, err)
		return
	case *batonpb.SessionResponse_SessionLost:
		s.lostLocked(fromWire(k.SessionLost))
		return
	case *batonpb.SessionResponse_HoldLost:
		s.holdLostLocked(k.HoldLost)
		return
	case *batonpb.SessionResponse_Holds:
		s.serverHoldsLocked(k.Holds)
		return
	case *batonpb.SessionResponse_RevokeRequested:
		s.revokeRequestedLocked(k.RevokeRequested)
		return
	}
	c := s.requests.byID[resp.GetId()]
	if c == nil {
		return
	}
	delete(s.requests.byID, resp.GetId())
	err := fromWire(resp.GetError())
	if c.keepAlive {
		s.keepAliveAnsweredLocked(sc, c, resp, err)
		return
	}
	if err != nil {
		var e *Error
		errors.As(err, &e)
		switch {
		case c.seq != 0 && retryable(err):
			if errors.Is(err, ErrNotLeader) {
				if e.LeaderAddr != "" {
					s.c.setLeader(e.LeaderAddr)
				}
				sc.cancel() // the reconnect sends c again
				return
			}
			s.resendLaterLocked(c)
			return
		case e != nil && (e.Reason == batonpb.Reason_SESSION_NOT_FOUND || e.Reason == batonpb.Reason_SESSION_EXPIRED):
			s.lostLocked(err)
			return
		}
		s.finishLocked(c, resp, err)
		return
	}
	if c.wait && resp.GetAcquire().GetQueued() {
		return // the grant or the end of the wait is its answer
	}
	s.finishLocked(c, resp, nil)
}

// resendLaterLocked sends c again, with its sequence number, after a
// backoff.
func (s *Session) resendLaterLocked(c *call) {
	d := s.c.pause(c.retries)
	c.retries++
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.endedLocked() && !c.final {
			s.sendLocked(c)
		}
	})
}

// finishLocked gives c its final answer.
func (s *Session) finishLocked(c *call, resp *batonpb.SessionResponse, err error) {
	if c.final {
		return
	}
	c.final, c.resp, c.err = true, resp, err
	if c.seq != 0 && s.requests.bySeq[c.seq] == c {
		delete(s.requests.bySeq, c.seq)
	}
	close(c.done)
	if c.abandoned {
		s.cleanupLocked(c)
	}
}

// abandon gives up on c for a caller whose ctx ended: a queued wait is
// cancelled on the server and a grant that won the race is released. It
// waits up to CleanupTimeout for both, so that when Lock returns the
// session neither waits nor holds; after that the session carries on in
// the background.
func (s *Session) abandon(c *call) {
	s.mu.Lock()
	c.abandoned = true
	if c.final {
		s.cleanupLocked(c)
	} else if c.wait {
		_, _ = s.startLocked(&batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Cancel{Cancel: &batonpb.CancelRequest{
			Name: c.name, AcquireSeq: c.seq,
		}}}, true)
	}
	s.mu.Unlock()
	t := time.NewTimer(CleanupTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		return
	}
	s.mu.Lock()
	rel := c.cleanup
	s.mu.Unlock()
	if rel != nil {
		select {
		case <-rel.done:
		case <-t.C:
		}
	}
}

// cleanupLocked releases what an abandoned acquire was granted.
func (s *Session) cleanupLocked(c *call) {
	if c.err != nil || c.resp == nil || s.endedLocked() {
		return
	}
	var granted []*batonpb.AcquireResponse
	if a := c.resp.GetAcquire(); a.GetAcquired() {
		granted = append(granted, a)
	}
	for _, a := range c.resp.GetAcquireMany().GetResults() {
		if a.GetAcquired() {
			granted = append(granted, a)
		}
	}
	for _, a := range granted {
		rel, err := s.startLocked(releaseRequest(a.GetName(), c.ownerKey, a.GetToken()), true)
		if err == nil {
			c.cleanup = rel
		}
	}
}

func releaseRequest(name, ownerKey string, token uint64) *batonpb.SessionRequest {
	s := &struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Release
		a batonpb.ReleaseRequest
	}{}
	s.a.Name, s.a.Token, s.a.OwnerKey = name, token, ownerKey
	s.k.Release = &s.a
	s.r.Kind = &s.k
	return &s.r
}

// acquireRequest returns a session request holding an acquire, a, in one
// allocation instead of three.
func acquireRequest() (req *batonpb.SessionRequest, a *batonpb.AcquireRequest) {
	s := &struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Acquire
		a batonpb.AcquireRequest
	}{}
	s.k.Acquire = &s.a
	s.r.Kind = &s.k
	return &s.r, &s.a
}
