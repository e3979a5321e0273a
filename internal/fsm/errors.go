package fsm

import (
	"fmt"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Error is a refusal decided by the state machine: the code that travels in
// fsmpb.Result.error and the message that names what was wrong. Match it with
// errors.Is against the sentinels below (they compare by Code), or with
// errors.AsType[*Error] to read the message.
type Error struct {
	Code fsmpb.Error
	Msg  string
	// Deadlock is the cycle of an ERROR_DEADLOCK refusal
	// (Result.deadlock), nil for every other code.
	Deadlock []*fsmpb.DeadlockEdge
}

// Error returns the message, prefixed with the package name.
func (e *Error) Error() string { return "fsm: " + e.Msg }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrNotHolder) holds for every not-holder refusal whatever its
// message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels, one per fsmpb.Error code. Each says when it is returned.
var (
	// ErrInvalidArgument: a malformed command (bad lock name, owner, TTL,
	// empty or duplicate batch, missing field). Nothing changed.
	ErrInvalidArgument = &Error{Code: fsmpb.Error_ERROR_INVALID_ARGUMENT, Msg: "invalid argument"}
	// ErrSessionNotFound: the session is unknown, closed or expired; also the
	// WaitEnded code of the waiters of a session that ended.
	ErrSessionNotFound = &Error{Code: fsmpb.Error_ERROR_SESSION_NOT_FOUND, Msg: "session not found"}
	// ErrLockNotFound: Release or CasRelease of a lock that has no holder.
	ErrLockNotFound = &Error{Code: fsmpb.Error_ERROR_LOCK_NOT_FOUND, Msg: "lock not found"}
	// ErrNotHolder: Release by a session and owner key that do not hold the
	// lock.
	ErrNotHolder = &Error{Code: fsmpb.Error_ERROR_NOT_HOLDER, Msg: "not the holder"}
	// ErrTokenMismatch: Release by the holder naming another token, or a
	// CasRelease whose session or token is not the current holder's.
	ErrTokenMismatch = &Error{Code: fsmpb.Error_ERROR_TOKEN_MISMATCH, Msg: "token mismatch"}
	// ErrBlacklisted: Acquire or AcquireMany by a blacklisted session; also
	// the WaitEnded code of its waiters when it is blacklisted.
	ErrBlacklisted = &Error{Code: fsmpb.Error_ERROR_BLACKLISTED, Msg: "session blacklisted"}
	// ErrTooManyWaiters: the lock's queue already has MaxWaitersPerLock
	// waiters.
	ErrTooManyWaiters = &Error{Code: fsmpb.Error_ERROR_TOO_MANY_WAITERS, Msg: "too many waiters"}
	// ErrTooManyPending: the session already has MaxPending unacknowledged
	// results; the command was not applied.
	ErrTooManyPending = &Error{Code: fsmpb.Error_ERROR_TOO_MANY_PENDING, Msg: "too many pending requests"}
	// ErrStaleSequence: seq is below the session's min_unacked_seq; its
	// answer was already acknowledged and forgotten.
	ErrStaleSequence = &Error{Code: fsmpb.Error_ERROR_STALE_SEQUENCE, Msg: "stale sequence"}
	// ErrNotWaiting: CancelWait of a waiter that is not queued (already
	// granted, cancelled or never queued).
	ErrNotWaiting = &Error{Code: fsmpb.Error_ERROR_NOT_WAITING, Msg: "not waiting"}
	// ErrWaitCancelled: the final state of a queued acquire that was
	// cancelled.
	ErrWaitCancelled = &Error{Code: fsmpb.Error_ERROR_WAIT_CANCELLED, Msg: "wait cancelled"}
	// ErrWaitTimedOut: the final state of a queued acquire whose wait
	// timeout passed.
	ErrWaitTimedOut = &Error{Code: fsmpb.Error_ERROR_WAIT_TIMED_OUT, Msg: "wait timed out"}
	// ErrTooManyHolds: the session would hold or wait for more than
	// MaxHoldsPerSession locks, or a reentrant count would overflow.
	ErrTooManyHolds = &Error{Code: fsmpb.Error_ERROR_TOO_MANY_HOLDS, Msg: "too many holds"}
	// ErrLimitMismatch: an acquire's holder limit is not the lock's, or a
	// reentrant acquire's mode (shared or exclusive) is not its hold's.
	ErrLimitMismatch = &Error{Code: fsmpb.Error_ERROR_LIMIT_MISMATCH, Msg: "limit mismatch"}
	// ErrSecretMismatch: a command for a session that has a secret does not
	// carry its hash. Nothing changed, not even the session's sequence
	// window, and no cached answer was given.
	ErrSecretMismatch = &Error{Code: fsmpb.Error_ERROR_SECRET_MISMATCH, Msg: "secret mismatch"}
	// ErrPermissionDenied: authentication is on and the command's
	// principal may not make it (AuthState), or the session it names is
	// another user's. Nothing changed.
	ErrPermissionDenied = &Error{Code: fsmpb.Error_ERROR_NOT_PERMITTED, Msg: "permission denied"}
	// ErrDeadlock: an Acquire with wait whose wait would close a deadlock
	// (deadlock.go), from log version 11; Result.deadlock names it.
	// Nothing was queued.
	ErrDeadlock = &Error{Code: fsmpb.Error_ERROR_DEADLOCK, Msg: "deadlock"}
	// ErrRefused: a retry of a request whose seq a fence settled
	// (seqfence.go): the leader refused it before the log, as its first
	// answer said. Nothing changed.
	ErrRefused = &Error{Code: fsmpb.Error_ERROR_REFUSED, Msg: "refused before the log"}
)

// ErrorOf returns nil if res succeeded (or is nil), and otherwise an *Error
// carrying res's code and message.
func ErrorOf(res *fsmpb.Result) error {
	if res == nil || res.GetError() == fsmpb.Error_ERROR_NONE {
		return nil
	}
	return &Error{Code: res.GetError(), Msg: res.GetMessage(), Deadlock: res.GetDeadlock().GetEdges()}
}

// errorf builds an *Error with a formatted message.
func errorf(code fsmpb.Error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// fail returns a fresh Result refusing the command with err.
func fail(err *Error) *fsmpb.Result {
	return &fsmpb.Result{Error: err.Code, Message: err.Msg}
}

// failf returns a fresh Result refusing the command with code and a
// formatted message.
func failf(code fsmpb.Error, format string, args ...any) *fsmpb.Result {
	return fail(errorf(code, format, args...))
}
