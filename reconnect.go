package baton

// The session's stream: attaching it on the leader (connect, dialStream),
// reading it, and when it breaks, reconnecting and resuming (streamLoop,
// reconnect).

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/batonlock/baton/api/batonpb"
)

// streamConn is the session's attached stream: its channel on the
// client's Sessions stream to addr. cancel detaches the channel; the
// session lives on, to resume on another.
type streamConn struct {
	ch     *muxChan
	cancel context.CancelFunc
	addr   string
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
			if hint := leaderHint(err); usableAddr(hint) && hint != addr && hops < 3 {
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

// streamLoop reads the current stream; when it breaks, it resumes the
// session on the leader, until the session ends.
//
// Reconnects back off: the n-th in a row waits Client.pause(n) first (by
// default 10-20 ms, doubling up to 0.5-1 s, with jitter), and the count
// starts again once a stream stayed up for the longest pause. A resume
// that succeeds is not enough to start again: a stream that ends as soon
// as it is attached (a member that ends it at once, a request it cannot
// take) would otherwise be resumed in a loop that takes a whole core.
func (s *Session) streamLoop(sc *streamConn) {
	breaks := 0 // in a row: each stream ended before the longest pause
	for sc != nil {
		attached := time.Now()
		err := s.recvLoop(sc)
		sc.cancel()
		s.mu.Lock()
		if s.stream == sc {
			s.stream = nil
			clear(s.requests.byID)
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
	s.requests.lastID++
	resume.Id = s.requests.lastID
	s.leases.serverHolds = nil // a partial list from the stream that broke
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
	clear(s.requests.byID)
	// A resume is a keepalive: the server extended the session from when
	// it received it.
	s.extendLocked(sent, s.serverTTL(resp.GetTtl()))
	resent := s.resendLocked()
	s.log.Info("session resumed", "peer", sc.addr, "resent", resent)
	return sc
}
