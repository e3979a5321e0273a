package baton

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
)

// ErrorDomain is the errdetails.ErrorInfo domain of Baton's errors.
const ErrorDomain = "batonlock.io"

// Sentinels. Each says when it is returned; match with errors.Is. An error
// answered by the server is an *Error, which matches every sentinel its
// Reason maps to (see reasonErrors), so errors.Is(err, ErrNotHeld) holds for
// a release of a lock held by someone else whatever the message says.
var (
	// ErrNotHeld: Release or Unlock of a hold the caller does not have
	// (Reasons NOT_HOLDER, LOCK_NOT_FOUND, TOKEN_MISMATCH).
	ErrNotHeld = errors.New("baton: lock not held")
	// ErrLockBusy: TryLock of a lock someone else holds. The error is a
	// *BusyError naming the holder.
	ErrLockBusy = errors.New("baton: lock busy")
	// ErrSessionLost: the session expired, was blacklisted and refused, or
	// the client gave up reaching the cluster (Reason SESSION_EXPIRED, and
	// SESSION_NOT_FOUND on a session's own requests). Every waiter of the
	// session fails with it at once, and every Lease of it is lost.
	ErrSessionLost = errors.New("baton: session lost")
	// ErrSessionClosed: the session was closed by Session.Close or
	// Client.Close; calls made on it afterwards fail with it.
	ErrSessionClosed = errors.New("baton: session closed")
	// ErrJeopardy is the cause of a Lease's Context and Lost when the
	// session's conservative deadline passed without a keepalive answer:
	// the server may release the hold soon (or may already have, after a
	// partition), so work under the lease must stop.
	ErrJeopardy = errors.New("baton: session in jeopardy: no keepalive answer before the conservative deadline")
	// ErrReleased is the cause of a Lease's Context once it was released.
	ErrReleased = errors.New("baton: lease released")
	// ErrHoldExpired is the cause of a Lease's Context and Lost when its
	// hold limit passed, in the client's conservative view, without a
	// renewal (WithHoldLimit: the library could not renew it, e.g. cut off
	// from the cluster; WithManualRenewal: the caller did not): the server
	// ends the hold soon after. It matches ErrNotHeld.
	ErrHoldExpired = fmt.Errorf("%w: hold limit passed", ErrNotHeld)
	// ErrRevoked matches the cause of a Lease's Context and Lost when a
	// revoke (Client.RevokeLock) asked the hold to end and the leader
	// ended it when the grace passed; that cause matches ErrNotHeld too.
	// A holder asked to let go learns it at once from RevokeRequested.
	ErrRevoked = errors.New("baton: hold revoked")
	// ErrBlacklisted: the session was blacklisted by an operator (Reason
	// BLACKLISTED); it cannot acquire and it will expire.
	ErrBlacklisted = errors.New("baton: session blacklisted")
	// ErrTokenMismatch: a release or CasRelease named a token (or session)
	// that is not the current holder's (Reason TOKEN_MISMATCH).
	ErrTokenMismatch = errors.New("baton: token mismatch")
	// ErrInvalidArgument: the request was refused as malformed: a bad lock
	// name, owner, TTL or wait (Reason INVALID_ARGUMENT), or an option given
	// to this package was out of range. Nothing changed.
	ErrInvalidArgument = errors.New("baton: invalid argument")
	// ErrNotFound: the named session or lock does not exist (Reasons
	// SESSION_NOT_FOUND and LOCK_NOT_FOUND).
	ErrNotFound = errors.New("baton: not found")
	// ErrWaitTimedOut: LockWithin's wait ended unserved (Reason
	// WAIT_TIMED_OUT); the waiter left the queue.
	ErrWaitTimedOut = errors.New("baton: wait timed out")
	// ErrWaitCancelled: a wait was cancelled on the server (Reason
	// WAIT_CANCELLED). Lock returns the caller's ctx.Err() instead when it
	// was the caller's ctx that ended the wait.
	ErrWaitCancelled = errors.New("baton: wait cancelled")
	// ErrNotWaiting: a cancel found no such waiter (Reason NOT_WAITING).
	ErrNotWaiting = errors.New("baton: not waiting")
	// ErrUnavailable: no member could serve the call within the retries
	// (gRPC UNAVAILABLE, Reasons NOT_LEADER and OUTCOME_UNKNOWN).
	ErrUnavailable = errors.New("baton: unavailable")
	// ErrNotLeader: the member is not the leader (Reason NOT_LEADER). The
	// client follows the leader by itself; callers see it only when the
	// retries ran out. It also matches ErrUnavailable.
	ErrNotLeader = errors.New("baton: not the leader")
	// ErrOutcomeUnknown: leadership changed before the request applied
	// (Reason OUTCOME_UNKNOWN); it may or may not have taken effect. Session
	// requests are retried with their sequence number and never show it; a
	// CasRelease or a membership change may, and so does the answer of
	// their retry after a connection broke mid-call (joined to that
	// answer's own error). It also matches ErrUnavailable.
	ErrOutcomeUnknown = errors.New("baton: outcome unknown")
	// ErrOverloaded: the leader sheds load (Reason OVERLOADED). Session
	// requests are retried after a backoff; unary calls return it.
	ErrOverloaded = errors.New("baton: overloaded")
	// ErrTooManyWaiters: the lock's queue is full (Reason TOO_MANY_WAITERS).
	ErrTooManyWaiters = errors.New("baton: too many waiters")
	// ErrTooManyPending: the session has too many unanswered requests
	// (Reason TOO_MANY_PENDING). A Lock that waits for a long time keeps
	// its request in the session's window, so a session that also makes
	// about a thousand other requests meanwhile meets this limit.
	ErrTooManyPending = errors.New("baton: too many pending requests")
	// ErrTooManySessions: the cluster has as many live sessions as its
	// leader admits (Reason TOO_MANY_SESSIONS, `baton server
	// --max-sessions`), or the client's user has as many as it admits of
	// one user (`--max-sessions-per-user`; the message says which);
	// nothing was opened. NewSession returns it at once: retrying helps
	// only once other sessions close or expire.
	ErrTooManySessions = errors.New("baton: too many sessions")
	// ErrNoSpace: the leader's data dir is nearly full (Reason NO_SPACE,
	// `baton server --min-free-disk`), so it takes no new session or
	// acquire; nothing was opened or acquired. Holds, keepalives, releases
	// and closes go on, and the leader takes new work again by itself once
	// space is freed. NewSession and Lock return it at once.
	ErrNoSpace = errors.New("baton: no space on the leader's disk")
	// ErrTooManyHolds: the session holds or waits for too many locks, or a
	// reentrant count would overflow (Reason TOO_MANY_HOLDS).
	ErrTooManyHolds = errors.New("baton: too many holds")
	// ErrStaleSequence: a request's sequence number was already answered
	// and forgotten (Reason STALE_SEQUENCE). It means a bug in this client.
	ErrStaleSequence = errors.New("baton: stale sequence")
	// ErrLimitMismatch: the lock is of another kind than the acquire says
	// (a semaphore of another size, a mutex acquired as a semaphore), or a
	// reentrant acquire asks for the other mode than the hold it re-enters
	// (a reader cannot become a writer) (Reason LIMIT_MISMATCH).
	ErrLimitMismatch = errors.New("baton: limit mismatch")
	// ErrDeadlock: a Lock's wait would have closed a deadlock (Reason
	// DEADLOCK): the lock is held, or waited for ahead, by a session
	// that waits, directly or through others, for a lock this session
	// (and owner key) holds. The server refused it at once, queueing
	// nothing; the error is a *DeadlockError naming the cycle. Release
	// what the session holds and start again (or take the locks in one
	// order everywhere, or as one LockSet).
	ErrDeadlock = errors.New("baton: deadlock")
	// ErrClientClosed: the Client was closed.
	ErrClientClosed = errors.New("baton: client closed")
	// ErrAlreadyExists: AddMember named a member the cluster has.
	ErrAlreadyExists = errors.New("baton: already exists")
	// ErrAborted: another membership change is still being applied;
	// nothing changed, try again.
	ErrAborted = errors.New("baton: aborted")
	// ErrPermissionDenied: an operator call (Blacklist, CasRelease, a
	// membership change) from a client whose certificate is not one of the
	// members' operators (`baton server --operators`), or a request for a
	// session that did not show the session's secret (Reason
	// SECRET_MISMATCH: only a session's owner may act for it).
	ErrPermissionDenied = errors.New("baton: permission denied")
	// ErrUnauthenticated: authentication is on and the call showed no
	// credential (WithToken, a client certificate) that names a user
	// (Reason NO_CREDENTIALS).
	ErrUnauthenticated = errors.New("baton: unauthenticated")
)

// reasonErrors is the one table from the server's Reasons to this
// package's sentinels. An *Error matches every sentinel of its Reason.
var reasonErrors = map[batonpb.Reason][]error{
	batonpb.Reason_INVALID_ARGUMENT:  {ErrInvalidArgument},
	batonpb.Reason_SESSION_NOT_FOUND: {ErrNotFound},
	batonpb.Reason_LOCK_NOT_FOUND:    {ErrNotFound, ErrNotHeld},
	batonpb.Reason_NOT_HOLDER:        {ErrNotHeld},
	batonpb.Reason_TOKEN_MISMATCH:    {ErrTokenMismatch, ErrNotHeld},
	batonpb.Reason_BLACKLISTED:       {ErrBlacklisted},
	batonpb.Reason_TOO_MANY_WAITERS:  {ErrTooManyWaiters},
	batonpb.Reason_TOO_MANY_PENDING:  {ErrTooManyPending},
	batonpb.Reason_STALE_SEQUENCE:    {ErrStaleSequence},
	batonpb.Reason_NOT_WAITING:       {ErrNotWaiting},
	batonpb.Reason_WAIT_CANCELLED:    {ErrWaitCancelled},
	batonpb.Reason_WAIT_TIMED_OUT:    {ErrWaitTimedOut},
	batonpb.Reason_TOO_MANY_HOLDS:    {ErrTooManyHolds},
	batonpb.Reason_NOT_LEADER:        {ErrNotLeader, ErrUnavailable},
	batonpb.Reason_OUTCOME_UNKNOWN:   {ErrOutcomeUnknown, ErrUnavailable},
	batonpb.Reason_OVERLOADED:        {ErrOverloaded},
	batonpb.Reason_SESSION_EXPIRED:   {ErrSessionLost},
	batonpb.Reason_LIMIT_MISMATCH:    {ErrLimitMismatch},
	batonpb.Reason_HOLD_LOST:         {ErrNotHeld},
	batonpb.Reason_SECRET_MISMATCH:   {ErrPermissionDenied},
	batonpb.Reason_NOT_PERMITTED:     {ErrPermissionDenied},
	batonpb.Reason_NO_CREDENTIALS:    {ErrUnauthenticated},
	batonpb.Reason_TOO_MANY_SESSIONS: {ErrTooManySessions},
	batonpb.Reason_NO_SPACE:          {ErrNoSpace},
	batonpb.Reason_DEADLOCK:          {ErrDeadlock},
}

// codeErrors maps gRPC codes of errors that carry no Reason (transport
// failures, and errors raised outside the server's table).
var codeErrors = map[codes.Code][]error{
	codes.Unavailable:      {ErrUnavailable},
	codes.InvalidArgument:  {ErrInvalidArgument},
	codes.NotFound:         {ErrNotFound},
	codes.AlreadyExists:    {ErrAlreadyExists},
	codes.Aborted:          {ErrAborted},
	codes.PermissionDenied: {ErrPermissionDenied},
	codes.Unauthenticated:  {ErrUnauthenticated},
	codes.Canceled:         {context.Canceled},
	codes.DeadlineExceeded: {
		context.DeadlineExceeded,
	},
}

// RefusedError is Dial's error when every endpoint it was given refused
// the connection: nothing listens there (a mistyped address, a cluster
// that is not running). Dial returns it at once rather than retry for
// its attempts and ctx; every other failure to reach a member is retried.
// It matches ErrUnavailable.
type RefusedError struct {
	// Addrs are the endpoints that refused, in the order given.
	Addrs []string
}

// Error names the addresses: "baton: no member listens at
// 127.0.0.1:7700 (connection refused)".
func (e *RefusedError) Error() string {
	return "baton: no member listens at " + strings.Join(e.Addrs, ", ") + " (connection refused)"
}

// Is matches ErrUnavailable.
func (e *RefusedError) Is(target error) bool { return target == ErrUnavailable }

// Error is an error answered by a Baton member: its gRPC code, its Reason
// and message, and for NOT_LEADER the leader's client address if the
// member knew it. errors.Is matches it against the sentinels of its Reason
// (or, with no Reason, of its code).
type Error struct {
	Code       codes.Code
	Reason     batonpb.Reason
	Message    string
	LeaderAddr string
}

// Error returns the message with the Reason.
func (e *Error) Error() string {
	if e.Reason == batonpb.Reason_REASON_UNSPECIFIED {
		return fmt.Sprintf("baton: %s (%s)", e.Message, e.Code)
	}
	return fmt.Sprintf("baton: %s (%s)", e.Message, e.Reason)
}

// Is reports whether target is one of the sentinels e's Reason maps to.
func (e *Error) Is(target error) bool {
	list, ok := reasonErrors[e.Reason]
	if !ok || e.Reason == batonpb.Reason_REASON_UNSPECIFIED {
		list = codeErrors[e.Code]
	}
	for _, s := range list {
		if s == target {
			return true
		}
	}
	return false
}

// BusyError is returned by TryLock (and a LockWithin that gave up) when
// someone else holds the lock. It matches ErrLockBusy.
type BusyError struct {
	Name string
	// Holder is the current holder as the server reported it; the zero
	// Holder if it did not say.
	Holder Holder
	// DelayedUntil, if not zero, is when the lock's lock-delay ends: a
	// holder's session or hold limit expired, and the lock is granted to
	// no one until then (the leader's clock; see WithLockDelay).
	DelayedUntil time.Time
}

// busyError is the BusyError of a, an acquire's answer that did not
// acquire name.
func busyError(name string, a *batonpb.AcquireResponse) *BusyError {
	e := &BusyError{Name: name, Holder: holderOf(a.GetHolder())}
	if a.GetDelayedUntil() != nil {
		e.DelayedUntil = a.GetDelayedUntil().AsTime()
	}
	return e
}

// Error names the lock and its holder, and its lock-delay if it is in one.
func (e *BusyError) Error() string {
	if !e.DelayedUntil.IsZero() && e.Holder.SessionID == 0 {
		return fmt.Sprintf("baton: lock %q is in its lock-delay until %s: a holder's session or hold limit expired, and the lock is granted to no one until then",
			e.Name, e.DelayedUntil.Format(time.RFC3339))
	}
	if !e.DelayedUntil.IsZero() {
		return fmt.Sprintf("baton: lock %q is busy: held by session %d (%q, key %q) with token %d, and in its lock-delay until %s",
			e.Name, e.Holder.SessionID, e.Holder.Owner, e.Holder.OwnerKey, e.Holder.Token, e.DelayedUntil.Format(time.RFC3339))
	}
	if e.Holder.SessionID == 0 {
		// A retried TryLockAll: the hold its first attempt got ended
		// before the answer came.
		return fmt.Sprintf("baton: lock %q was not taken: the hold an earlier attempt of this request got on it has since ended", e.Name)
	}
	return fmt.Sprintf("baton: lock %q is busy: held by session %d (%q, key %q) with token %d",
		e.Name, e.Holder.SessionID, e.Holder.Owner, e.Holder.OwnerKey, e.Holder.Token)
}

// Is makes errors.Is(err, ErrLockBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrLockBusy }

// DeadlockError is a Lock refused because its wait would have closed a
// deadlock (Reason DEADLOCK). It matches ErrDeadlock, and unwraps to the
// server's *Error.
type DeadlockError struct {
	// Cycle is the deadlock, the refused wait first: each edge's waiter
	// waits for its lock, blocked by the next edge's waiter, the last by
	// the first's. (If the wait would have joined a deadlock that was
	// there before it, the last edge's blocker is an earlier edge's.)
	Cycle []DeadlockEdge
	Err   *Error
}

// DeadlockEdge is one wait of a deadlock: (SessionID, OwnerKey) waits for
// Lock, which (BlockerSessionID, BlockerOwnerKey) holds, or with
// QueuedAhead waits for ahead of it in its FIFO queue.
type DeadlockEdge struct {
	SessionID        uint64
	OwnerKey         string
	Lock             string
	QueuedAhead      bool
	BlockerSessionID uint64
	BlockerOwnerKey  string
}

// Error names the cycle in one line: `baton: deadlock: session 7 waits
// for lock "b" held by session 8, session 8 waits for lock "a" held by
// session 7`.
func (e *DeadlockError) Error() string {
	if len(e.Cycle) == 0 {
		if e.Err == nil {
			return ErrDeadlock.Error()
		}
		return e.Err.Error()
	}
	var b strings.Builder
	b.WriteString("baton: deadlock: ")
	for i, c := range e.Cycle {
		if i > 0 {
			b.WriteString(", ")
		}
		how := " held by "
		if c.QueuedAhead {
			how = " behind "
		}
		fmt.Fprintf(&b, "%s waits for lock %q%s%s", holderName(c.SessionID, c.OwnerKey), c.Lock, how,
			holderName(c.BlockerSessionID, c.BlockerOwnerKey))
	}
	return b.String()
}

// holderName is "session 7", or `session 7 key "k"`.
func holderName(session uint64, key string) string {
	if key == "" {
		return fmt.Sprintf("session %d", session)
	}
	return fmt.Sprintf("session %d key %q", session, key)
}

// Is makes errors.Is(err, ErrDeadlock) hold.
func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// Unwrap returns the server's *Error, if there is one.
func (e *DeadlockError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// deadlockError is e, or, for a DEADLOCK refusal, the *DeadlockError of
// e with cycle.
func deadlockError(e *Error, cycle []*batonpb.DeadlockEdge) error {
	if e.Reason != batonpb.Reason_DEADLOCK {
		return e
	}
	d := &DeadlockError{Err: e, Cycle: make([]DeadlockEdge, len(cycle))}
	for i, c := range cycle {
		d.Cycle[i] = DeadlockEdge{SessionID: c.GetSessionId(), OwnerKey: c.GetOwnerKey(), Lock: c.GetLock(),
			QueuedAhead: c.GetQueuedAhead(), BlockerSessionID: c.GetBlockerSessionId(), BlockerOwnerKey: c.GetBlockerOwnerKey()}
	}
	return d
}

// fromStatus turns a gRPC error into an *Error (or a *DeadlockError, or a
// context error). Other errors are returned unchanged.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if _, ok := status.FromError(err); !ok {
			return err
		}
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message()}
	var cycle []*batonpb.DeadlockEdge
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() == ErrorDomain {
				e.Reason = batonpb.Reason(batonpb.Reason_value[d.GetReason()])
				e.LeaderAddr = d.GetMetadata()["leader_addr"]
			}
		case *batonpb.DeadlockCycle:
			cycle = d.GetEdges()
		}
	}
	return deadlockError(e, cycle)
}

// fromWire turns the Error of a stream response into an *Error (or a
// *DeadlockError).
func fromWire(w *batonpb.Error) error {
	if w == nil {
		return nil
	}
	e := &Error{Code: codes.Code(w.GetCode()), Reason: w.GetReason(), Message: w.GetMessage(), LeaderAddr: w.GetLeaderAddr()}
	return deadlockError(e, w.GetDeadlockCycle())
}

// leaderHint returns the leader address an error carries, if any.
func leaderHint(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.LeaderAddr
	}
	return ""
}

// retryable reports whether a session request that got err should be sent
// again with the same sequence number: the member did not lead, lost
// leadership before the outcome was known, or shed load.
func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOverloaded)
}
