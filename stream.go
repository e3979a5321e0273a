package baton

// The session's stream: requests and their sequence numbers, the reader,
// the reconnect-and-resume loop and the keepalive clock.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
)

// startLocked registers a request and queues it for sending. Mutating
// requests get the next sequence number. A request that cannot be sent
// (see sendable) fails alone, before it has a sequence number or reaches
// the stream.
func (s *Session) startLocked(req *batonpb.SessionRequest, mutating bool) (*call, error) {
	if s.endedLocked() {
		return nil, s.err
	}
	if err := sendable(req); err != nil {
		return nil, err
	}
	c := &call{req: req, done: make(chan struct{}), started: time.Now()}
	if mutating {
		s.lastSeq++
		c.seq = s.lastSeq
		s.bySeq[c.seq] = c
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
	s.lastID++
	c.id = s.lastID
	s.byID[c.id] = c
	var h *batonpb.RequestHeader // stamp copies it: it stays on the stack
	if c.seq != 0 {
		h = &batonpb.RequestHeader{SessionId: s.id, Seq: c.seq, MinUnackedSeq: s.minUnackedLocked()}
	}
	if err := s.stream.ch.Send(stamp(c.req, c.id, h)); err != nil {
		s.stream.cancel() // the reader reports why; the reconnect resends
	}
}

// stamp returns what one send of req carries: req with id and, for a
// mutating request (h not nil), a copy of the header. req stays as it is,
// for a resend on another stream; the copy is new down to the message that
// carries the header and shares the rest (strings, durations), which
// nobody changes once sent, so that an acquire's or a release's copy is
// one allocation (proto.Clone's deep copy costs a busy client dearly).
// TestStampCopiesEveryField fails if a field added to these requests is
// not copied here.
func stamp(req *batonpb.SessionRequest, id uint64, h *batonpb.RequestHeader) *batonpb.SessionRequest {
	if h == nil {
		return &batonpb.SessionRequest{Id: id, Kind: req.GetKind()}
	}
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a, s := k.Acquire, &stampedAcquire{}
		copyHeader(&s.h, h)
		s.a.Header, s.a.Name, s.a.OwnerKey, s.a.Wait, s.a.WaitTimeout = &s.h, a.GetName(), a.GetOwnerKey(), a.GetWait(), a.GetWaitTimeout()
		s.a.Shared, s.a.Limit, s.a.HoldLimit = a.GetShared(), a.GetLimit(), a.GetHoldLimit()
		s.k.Acquire = &s.a
		s.r.Id, s.r.Kind = id, &s.k
		return &s.r
	case *batonpb.SessionRequest_Release:
		a, s := k.Release, &stampedRelease{}
		copyHeader(&s.h, h)
		s.a.Header, s.a.Name, s.a.Token, s.a.OwnerKey = &s.h, a.GetName(), a.GetToken(), a.GetOwnerKey()
		s.k.Release = &s.a
		s.r.Id, s.r.Kind = id, &s.k
		return &s.r
	}
	r := &batonpb.SessionRequest{Id: id, Kind: req.GetKind()}
	hc := &batonpb.RequestHeader{}
	copyHeader(hc, h)
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_AcquireMany:
		a := k.AcquireMany
		r.Kind = &batonpb.SessionRequest_AcquireMany{AcquireMany: &batonpb.AcquireManyRequest{
			Header: hc, Names: a.GetNames(), OwnerKey: a.GetOwnerKey(),
			Shared: a.GetShared(), Limit: a.GetLimit(), All: a.GetAll(), HoldLimit: a.GetHoldLimit(),
		}}
	case *batonpb.SessionRequest_Cancel:
		a := k.Cancel
		r.Kind = &batonpb.SessionRequest_Cancel{Cancel: &batonpb.CancelRequest{
			Header: hc, Name: a.GetName(), AcquireSeq: a.GetAcquireSeq(),
		}}
	case *batonpb.SessionRequest_Close:
		r.Kind = &batonpb.SessionRequest_Close{Close: &batonpb.CloseSessionRequest{SessionId: h.GetSessionId(), Seq: h.GetSeq(), Secret: k.Close.GetSecret()}}
	}
	return r
}

func copyHeader(dst, src *batonpb.RequestHeader) {
	dst.SessionId, dst.Seq, dst.MinUnackedSeq = src.GetSessionId(), src.GetSeq(), src.GetMinUnackedSeq()
}

// stampedAcquire and stampedRelease are a send of the two commonest
// requests, its messages allocated together.
type (
	stampedAcquire struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Acquire
		a batonpb.AcquireRequest
		h batonpb.RequestHeader
	}
	stampedRelease struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Release
		a batonpb.ReleaseRequest
		h batonpb.RequestHeader
	}
)

// minUnackedLocked is the lowest sequence number without a final answer.
// A queued acquire counts as unanswered until it is granted or its wait
// ends, so that a retry after a reconnect can still learn its outcome.
func (s *Session) minUnackedLocked() uint64 {
	m := s.lastSeq + 1
	for seq := range s.bySeq {
		m = min(m, seq)
	}
	return m
}

// finishLocked gives c its final answer.
func (s *Session) finishLocked(c *call, resp *batonpb.SessionResponse, err error) {
	if c.final {
		return
	}
	c.final, c.resp, c.err = true, resp, err
	if c.seq != 0 && s.bySeq[c.seq] == c {
		delete(s.bySeq, c.seq)
	}
	close(c.done)
	if c.abandoned {
		s.cleanupLocked(c)
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

// run reads the current stream; when it breaks, it resumes the session on
// the leader.
//
// Reconnects back off: the n-th in a row waits Client.pause(n) first (by
// default 10-20 ms, doubling up to 0.5-1 s, with jitter), and the count
// starts again once a stream stayed up for the longest pause. A resume
// that succeeds is not enough to start again: a stream that ends as soon
// as it is attached (a member that ends it at once, a request it cannot
// take) would otherwise be resumed in a loop that takes a whole core.
func (s *Session) run(sc *streamConn) {
	defer s.wg.Done()
	breaks := 0 // in a row: each stream ended before the longest pause
	for sc != nil {
		attached := time.Now()
		err := s.recvLoop(sc)
		sc.cancel()
		s.mu.Lock()
		if s.stream == sc {
			s.stream = nil
			clear(s.byID)
		}
		ended := s.endedLocked()
		s.mu.Unlock()
		if ended {
			return
		}
		if time.Since(attached) >= s.c.cfg.maxBackoff {
			breaks = 0
		}
		s.log.Info("session stream broke; resuming", "peer", sc.addr, "err", err)
		if sleep(s.runCtx, s.c.pause(breaks)) != nil {
			return // closed meanwhile
		}
		breaks++
		sc = s.reconnect()
	}
}

// recvLoop hands sc's answers to handle until the stream ends, and
// returns why it ended.
func (s *Session) recvLoop(sc *streamConn) error {
	sc.ch.handOff(func(resp *batonpb.SessionResponse) { s.handle(sc, resp) })
	return sc.ch.waitEnd()
}

// testHookReconnect, when set, runs as a session starts to reconnect.
var testHookReconnect atomic.Pointer[func()]

// reconnect attaches a new stream to the leader with Resume, then sends
// every unanswered request again with its sequence number. It returns nil
// when the session ended.
func (s *Session) reconnect() *streamConn {
	resume := &batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Resume{Resume: &batonpb.ResumeSession{SessionId: s.id, Secret: s.secret}}}
	s.mu.Lock()
	s.lastID++
	resume.Id = s.lastID
	s.serverHolds = nil // a partial list from the stream that broke
	s.mu.Unlock()
	if h := testHookReconnect.Load(); h != nil {
		(*h)()
	}
	sc, resp, sent, err := s.connect(s.runCtx, resume, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.runCtx.Err() == nil {
			s.lostLocked(err)
		}
		return nil
	}
	if s.endedLocked() {
		sc.cancel()
		return nil
	}
	s.stream = sc
	clear(s.byID)
	// A resume is a keepalive: the server extended the session from when
	// it received it.
	s.extendLocked(sent, s.serverTTL(resp.GetTtl()))
	pending := slices.Collect(func(yield func(*call) bool) {
		for _, c := range s.bySeq {
			if !yield(c) {
				return
			}
		}
	})
	slices.SortFunc(pending, func(a, b *call) int { return cmp.Compare(a.seq, b.seq) })
	for _, c := range pending {
		s.sendLocked(c)
	}
	s.log.Info("session resumed", "peer", sc.addr, "resent", len(pending))
	return sc
}

// connect opens a stream whose first message is first on the leader,
// following leader hints and rotating over the endpoints. bounded limits
// it to the client's attempts; otherwise only ctx and a terminal answer
// (session unknown, refused) stop it.
func (s *Session) connect(ctx context.Context, first *batonpb.SessionRequest, bounded bool) (*streamConn, *batonpb.OpenSessionResponse, time.Time, error) {
	var last error
	hops := 0
	for attempt := 0; ; attempt++ {
		if bounded && attempt >= s.c.cfg.maxAttempts {
			return nil, nil, time.Time{}, fmt.Errorf("%w: gave up after %d attempts: %w", ErrUnavailable, attempt, last)
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, time.Time{}, err
		}
		addr := s.c.target()
		sent := time.Now()
		hctx, cancel := context.WithTimeout(ctx, max(s.ttl/2, time.Second))
		sc, resp, err := s.dialStream(hctx, addr, first)
		cancel()
		if err == nil {
			s.c.setLeader(addr)
			return sc, resp, sent, nil
		}
		last = err
		switch {
		case errors.Is(err, ErrNotLeader):
			if hint := leaderHint(err); hint != "" && hint != addr && hops < 3 {
				s.c.setLeader(hint)
				hops++
				continue
			}
			s.c.failed(addr)
		case errors.Is(err, ErrUnavailable), errors.Is(err, ErrOverloaded),
			errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			s.c.failed(addr)
		case errors.Is(err, context.Canceled) && ctx.Err() == nil:
			s.c.failed(addr)
		default:
			return nil, nil, time.Time{}, err
		}
		hops = 0
		s.log.Debug("session stream attempt failed", "peer", addr, "err", err)
		_ = sleep(ctx, s.c.pause(attempt))
	}
}

// dialStream opens a channel of the Sessions stream to addr, sends first
// on it and reads its answer. A member that does not serve Sessions (it
// answers Unimplemented) is refused with an error matching
// errors.ErrUnsupported: every supported release serves it, and the
// client speaks no other session protocol.
func (s *Session) dialStream(ctx context.Context, addr string, first *batonpb.SessionRequest) (*streamConn, *batonpb.OpenSessionResponse, error) {
	if err := sendable(first); err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(s.runCtx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	ch, err := s.c.channel(sctx, addr)
	if err != nil {
		cancel()
		return nil, nil, fromStatus(err)
	}
	_ = ch.Send(first) // a failed send shows in Recv, with the status
	resp, err := ch.Recv()
	if err == nil && resp.GetError() != nil {
		err = fromWire(resp.GetError())
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Code == codes.Unimplemented {
		err = fmt.Errorf("%w: member %s does not serve the Sessions stream, the one session protocol of this client: %w", errors.ErrUnsupported, addr, err)
	}
	if err == nil && resp.GetOpen() == nil {
		err = fmt.Errorf("baton: the server answered the stream's first message with %T", resp.GetKind())
	}
	if err != nil {
		cancel()
		return nil, nil, fromStatus(err)
	}
	return &streamConn{ch: ch, cancel: cancel, addr: addr}, resp.GetOpen(), nil
}

// handle takes one message of stream sc.
func (s *Session) handle(sc *streamConn, resp *batonpb.SessionResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != sc || s.endedLocked() {
		return
	}
	switch k := resp.GetKind().(type) {
	case *batonpb.SessionResponse_Grant:
		c := s.bySeq[k.Grant.GetSeq()]
		if c == nil {
			s.log.Warn("grant for an unknown acquire", "lock", k.Grant.GetName(), "seq", k.Grant.GetSeq(), "token", k.Grant.GetToken())
			return
		}
		s.finishLocked(c, &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Acquire{Acquire: &batonpb.AcquireResponse{
			Name: k.Grant.GetName(), Acquired: true, Token: k.Grant.GetToken(), Count: 1, Seq: k.Grant.GetSeq(),
		}}}, nil)
		return
	case *batonpb.SessionResponse_WaitEnded:
		c := s.bySeq[k.WaitEnded.GetSeq()]
		if c == nil || !c.wait {
			return
		}
		w := k.WaitEnded
		var err error = &Error{Code: codes.FailedPrecondition, Reason: w.GetReason(), Message: "wait for lock " + w.GetName() + " ended"}
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
	}
	c := s.byID[resp.GetId()]
	if c == nil {
		return
	}
	delete(s.byID, resp.GetId())
	err := fromWire(resp.GetError())
	if c.keepAlive {
		s.keepAliveAnswerLocked(sc, c, resp, err)
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

func (s *Session) keepAliveAnswerLocked(sc *streamConn, c *call, resp *batonpb.SessionResponse, err error) {
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

// clock sends keepalives every TTL/3 and watches the deadline.
func (s *Session) clock() {
	defer s.wg.Done()
	ka := time.NewTicker(s.ttl / 3)
	defer ka.Stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		next := s.deadline
		if s.state == StateJeopardy {
			next = s.deadline.Add(s.ttl) // give up a TTL past the deadline
		}
		s.mu.Unlock()
		t.Reset(time.Until(next))
		select {
		case <-s.runCtx.Done():
			return
		case <-ka.C:
			s.keepAlive()
		case <-s.wake:
		case <-t.C:
			s.checkDeadline()
		}
	}
}

func (s *Session) keepAlive() {
	if s.testPauseKeepAlives.Load() {
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

func (s *Session) checkDeadline() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.state == StateHealthy && !now.Before(s.deadline):
		s.log.Warn("session in jeopardy: no keepalive answer before the deadline", "late", now.Sub(s.deadline))
		for _, ls := range s.holds {
			for _, l := range ls {
				s.endLeaseLocked(l, ErrJeopardy)
			}
		}
		s.setStateLocked(StateJeopardy, StateJeopardy, ErrJeopardy)
	case s.state == StateJeopardy && !now.Before(s.deadline.Add(s.ttl)):
		s.lostLocked(fmt.Errorf("%w: no answer from the cluster for a TTL (%v) past the deadline", ErrSessionLost, s.ttl))
	}
}

// dispatch delivers events to the WithEvents callback, in order.
func (s *Session) dispatch() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		evs := s.events
		s.events = nil
		s.mu.Unlock()
		for _, ev := range evs {
			s.onEvent(ev)
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-s.eventWake:
		case <-s.runCtx.Done():
			s.mu.Lock()
			evs := s.events
			s.events = nil
			s.mu.Unlock()
			for _, ev := range evs {
				s.onEvent(ev)
			}
			return
		}
	}
}
