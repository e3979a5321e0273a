package baton

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
)

// State is a session's state as the client sees it, after Chubby's
// session events.
type State int

const (
	// StateHealthy: the session's conservative deadline lies ahead; every
	// Lease of it is valid.
	StateHealthy State = iota
	// StateJeopardy: the conservative deadline passed with no keepalive
	// answer. Every Lease of the session is lost at that instant (its
	// Context cancelled with ErrJeopardy, its Lost channel closed), before
	// the server can hand any of its holds on. The session may still come
	// back (StateSafe); locks acquired while in jeopardy wait for it.
	StateJeopardy
	// StateSafe is an event only: an answer came back in time after a
	// jeopardy and the server still had the session, so it is healthy
	// again (State reports StateHealthy). Leases lost in the jeopardy stay
	// lost, but their holds still exist on the server: Release them, or
	// keep working only under a fresh Lock.
	StateSafe
	// StateExpired: the session is gone (expired, refused, or the client
	// gave up reaching the cluster a TTL past the deadline). Done is closed
	// and every call fails with an error matching ErrSessionLost.
	StateExpired
	// StateClosed: Session.Close or Client.Close ended the session.
	StateClosed
)

// String names the state.
func (st State) String() string {
	switch st {
	case StateHealthy:
		return "healthy"
	case StateJeopardy:
		return "jeopardy"
	case StateSafe:
		return "safe"
	case StateExpired:
		return "expired"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int(st))
}

// Event is one change of a session's state (see WithEvents).
type Event struct {
	State State
	// At is when the client decided the change (a monotonic reading).
	At time.Time
	// Err is the cause of a jeopardy, expiry or close.
	Err error
	// Revoked, if set, says that a revoke (Client.RevokeLock) asked one
	// of the session's holds to end: the event is no change of state
	// (State is the session's current one). Each Lease of the hold tells
	// it too (RevokeRequested).
	Revoked *Revocation
}

// Session is a client session: the liveness that every hold and wait of it
// rides on. One long-lived stream to the leader carries its keepalives
// (every TTL/3), its requests (pipelined) and the grants pushed to it; when
// the stream breaks the session follows the leader, resumes, and sends
// every unanswered request again with its original sequence number, so
// each takes effect exactly once. Resumes back off as other attempts do
// (WithBackoff): streams that keep breaking are resumed a few times a
// second at most. A Session is safe for concurrent use.
//
// A lock can be lost at any time: a partition, a pause or an operator's
// blacklist ends the session. Work under a lock should run under its
// Lease's Context and write through fencing tokens.
type Session struct {
	c      *Client
	log    *slog.Logger
	id     uint64
	secret string // proves to the server that a request is this session's
	ttl    time.Duration
	owner  string

	// runCtx ends with the session. It stops the session's stream and
	// its goroutines (streamLoop, keepAliveLoop, deliverEvents), which wg
	// waits for.
	runCtx  context.Context
	stopRun context.CancelFunc
	wg      sync.WaitGroup

	// mu guards the stream, the fields of the groups below that say so,
	// and those of the session's calls and Leases that say so.
	mu        sync.Mutex
	life      lifecycle      // state, and how the session ended (this file)
	events    eventQueue     // the WithEvents callback's queue (this file)
	keepalive keepaliveState // the client's deadline (keepalive.go)
	requests  requestTable   // sequence numbers, unanswered calls (requests.go)
	stream    *streamConn    // the attached stream; nil while reconnecting (reconnect.go)
	leases    leaseTable     // the Leases by hold, their renewals (leases.go)
}

// lifecycle is where a session is between NewSession and its end.
// Guarded by Session.mu.
type lifecycle struct {
	state   State
	stateC  chan struct{} // closed and replaced at every state change
	err     error         // why the session ended
	done    chan struct{} // closed when the session ended
	closing *call         // Close's request, once sent
}

// eventQueue holds the session's events until deliverEvents hands them to
// the WithEvents callback, in order.
type eventQueue struct {
	onEvent func(Event)   // nil: no callback, and nothing is queued
	wake    chan struct{} // pending grew
	pending []Event       // guarded by Session.mu
}

// NewSession opens a session on the leader. It returns once the session
// exists, or the first error: ErrInvalidArgument for bad options,
// ErrUnavailable when no leader answered within the attempts and ctx.
func (c *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	cfg := defaultSessionConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	s := &Session{
		c: c, log: c.log, secret: newSecret(), ttl: cfg.ttl, owner: cfg.owner,
		runCtx: runCtx, stopRun: stop,
		life:      lifecycle{stateC: make(chan struct{}), done: make(chan struct{})},
		events:    eventQueue{onEvent: cfg.onEvent, wake: make(chan struct{}, 1)},
		keepalive: keepaliveState{margin: SafetyMargin(cfg.ttl), wake: make(chan struct{}, 1)},
		requests:  requestTable{byID: make(map[uint64]*call), bySeq: make(map[uint64]*call)},
		leases:    leaseTable{holds: make(map[holdKey][]*Lease), renewing: make(map[holdKey]uint64)},
	}
	if err := c.addSession(s); err != nil {
		stop()
		return nil, err
	}
	// The nonce makes the open exactly-once across connect's retries: a
	// retry after a lost answer finds the session the first attempt made
	// (the secret is ours, so the retry shows the same).
	open := &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Open{Open: &batonpb.OpenSessionRequest{
		Ttl: durationpb.New(cfg.ttl), Owner: cfg.owner, Nonce: rand.Uint64() | 1, Secret: s.secret,
	}}}
	// The deadline counts from before the first attempt: a retry may be
	// answered with the session an earlier attempt opened (the nonce),
	// whose TTL on the leader began when that attempt applied.
	sent := time.Now()
	sc, resp, _, err := s.connect(ctx, open, true)
	if err != nil {
		stop()
		c.removeSession(s)
		return nil, err
	}
	s.id = resp.GetSessionId()
	s.log = s.log.With("session", s.id)
	s.requests.lastID = 1
	s.mu.Lock()
	s.stream = sc
	s.keepalive.deadline = sent.Add(s.serverTTL(resp.GetTtl()) - s.keepalive.margin)
	s.mu.Unlock()
	s.wg.Go(func() { s.streamLoop(sc) })
	s.wg.Go(s.keepAliveLoop)
	if s.events.onEvent != nil {
		s.wg.Go(s.deliverEvents)
	}
	return s, nil
}

// ID is the session's id (unique forever in its cluster).
func (s *Session) ID() uint64 { return s.id }

// Secret is what proves to the cluster that a request is this session's:
// the client draws it (32 bytes from crypto/rand) and shows it on every
// stream it opens or resumes. The id is public; the secret is not. Give
// it only to a process that should act for this session (`baton lock`
// passes it to its command as BATON_SESSION_SECRET), never to a log.
func (s *Session) Secret() string { return s.secret }

// newSecret draws a session secret: 32 bytes from crypto/rand, base64url
// (43 characters).
func newSecret() string {
	b := make([]byte, 32)
	crand.Read(b) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TTL is the session's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Owner is the session's owner label.
func (s *Session) Owner() string { return s.owner }

// Done is closed when the session ended: expired, lost or closed. Err says
// why.
func (s *Session) Done() <-chan struct{} { return s.life.done }

// Err is nil while the session lives; then an error matching
// ErrSessionLost (expired; also ErrBlacklisted when an operator evicted
// it) or ErrSessionClosed (closed).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life.err
}

// State is the session's state now: healthy, jeopardy, expired or closed.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.life.state
}

// Deadline is the client's conservative deadline: the session is valid,
// in the client's eyes, until then.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keepalive.deadline
}

// Close ends the session on the server, which releases its holds and drops
// its waits at once, and stops its goroutines. If ctx ends first, Close
// stops the goroutines anyway and returns ctx.Err(); the server then ends
// the session after its TTL. Closing an ended session returns nil. Do not
// call Close from a WithEvents callback.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.endedLocked() {
		s.mu.Unlock()
		s.wait()
		return nil
	}
	if s.life.closing == nil {
		s.life.closing, _ = s.startLocked(&batonpb.SessionRequest{Kind: &batonpb.SessionRequest_Close{Close: &batonpb.CloseSessionRequest{}}}, true)
	}
	c := s.life.closing
	s.mu.Unlock()
	var err error
	select {
	case <-c.done:
		if c.err != nil && !errors.Is(c.err, ErrSessionClosed) && !errors.Is(c.err, ErrSessionLost) && !errors.Is(c.err, ErrNotFound) {
			err = c.err
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.shutdown(ErrSessionClosed, StateClosed)
	s.wait()
	return err
}

// shutdown ends the session locally.
func (s *Session) shutdown(err error, st State) {
	s.mu.Lock()
	s.endLocked(err, st)
	s.mu.Unlock()
}

// wait waits for the session's goroutines.
func (s *Session) wait() {
	s.wg.Wait()
	s.c.removeSession(s)
}

// endedLocked reports whether the session ended (expired or closed).
func (s *Session) endedLocked() bool {
	return s.life.state == StateExpired || s.life.state == StateClosed
}

// endLocked ends the session: every lease is lost, every call fails with
// err, the goroutines stop.
func (s *Session) endLocked(err error, st State) {
	if s.endedLocked() {
		return
	}
	s.life.err = err
	s.endEveryLeaseLocked(err)
	clear(s.leases.holds)
	for _, c := range s.requests.bySeq {
		s.finishLocked(c, nil, err)
	}
	for _, c := range s.requests.byID {
		s.finishLocked(c, nil, err)
	}
	if s.life.closing != nil {
		s.finishLocked(s.life.closing, nil, err)
	}
	s.setStateLocked(st, st, err)
	close(s.life.done)
	s.stopRun()
	s.log.Info("session ended", "state", st.String(), "err", err)
}

// lostLocked ends the session because the server no longer has it (or
// refuses it); a Close in progress makes that a clean close.
func (s *Session) lostLocked(cause error) {
	if s.life.closing != nil {
		s.finishLocked(s.life.closing, nil, nil)
		s.endLocked(ErrSessionClosed, StateClosed)
		return
	}
	if !errors.Is(cause, ErrSessionLost) {
		cause = fmt.Errorf("%w: %w", ErrSessionLost, cause)
	}
	s.endLocked(cause, StateExpired)
}

// setStateLocked moves to st and emits ev (st itself, or StateSafe).
func (s *Session) setStateLocked(st, ev State, err error) {
	s.life.state = st
	close(s.life.stateC)
	s.life.stateC = make(chan struct{})
	s.emitLocked(Event{State: ev, At: time.Now(), Err: err})
}

// emitLocked queues ev for the WithEvents callback, if there is one.
func (s *Session) emitLocked(ev Event) {
	if s.events.onEvent == nil {
		return
	}
	s.events.pending = append(s.events.pending, ev)
	poke(s.events.wake)
}

// deliverEvents hands the session's events to the WithEvents callback,
// in order, one call at a time, never with Session.mu held, until the
// session ended and its last event was delivered.
func (s *Session) deliverEvents() {
	for {
		s.deliverPendingEvents()
		select {
		case <-s.events.wake:
		case <-s.runCtx.Done():
			s.deliverPendingEvents()
			return
		}
	}
}

// deliverPendingEvents hands over what is queued, and what is queued
// meanwhile, until the queue is empty.
func (s *Session) deliverPendingEvents() {
	for {
		s.mu.Lock()
		evs := s.events.pending
		s.events.pending = nil
		s.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			s.events.onEvent(ev)
		}
	}
}

// poke wakes the goroutine that waits on ch (a channel of one slot)
// without blocking: a wake-up already pending is enough.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
