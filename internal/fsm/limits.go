package fsm

import (
	"fmt"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Limits of the state, which a request alone cannot break (what one may
// contain is package rules'). Each bounds the memory or the work of one
// log entry, so that no single client can make every replica slow.
const (
	// MaxWaitersPerLock bounds one lock's FIFO queue, whose removals are
	// linear in its length.
	MaxWaitersPerLock = 10000
	// MaxPending bounds the cached results of one session (its
	// unacknowledged request window), which live in every snapshot.
	MaxPending = 1024
	// MaxHoldsPerSession bounds the locks one session holds or waits for at
	// once, which bounds the work of applying its expiry.
	MaxHoldsPerSession = 100000
)

// ValidateLockName returns nil if name can name a lock (rules.CheckLockName).
// Otherwise it returns an *Error matching ErrInvalidArgument.
func ValidateLockName(name string) error {
	if err := checkLockName(name); err != nil {
		return err
	}
	return nil
}

// ValidateOwner returns nil if owner can be a session's owner label
// (rules.CheckOwner). Otherwise it returns an *Error matching
// ErrInvalidArgument.
func ValidateOwner(owner string) error {
	if err := checkOwner(owner); err != nil {
		return err
	}
	return nil
}

// ValidateTTL returns nil if ttlNanos is a valid session TTL in
// nanoseconds (rules.CheckTTL). Otherwise it returns an *Error matching
// ErrInvalidArgument. (OpenSession also accepts 0, meaning
// rules.DefaultTTL.)
func ValidateTTL(ttlNanos int64) error {
	if err := checkTTL(ttlNanos); err != nil {
		return err
	}
	return nil
}

// The check functions return a typed nil-able *Error for internal use; the
// exported wrappers convert to error without the typed-nil trap. Their
// words are package rules', so that a refusal here reads as the client's
// and the API's.

func checkLockName(name string) *Error { return refusal(rules.CheckLockName(name)) }

func checkOwner(label string) *Error { return refusal(rules.CheckOwner(label)) }

func checkOwnerKey(key string) *Error { return refusal(rules.CheckOwnerKey(key)) }

func checkTTL(ttl int64) *Error { return refusal(rules.CheckTTLNanos(ttl)) }

// refusal is the state machine's refusal of what a rule refused, in the
// rule's words; nil for nil.
func refusal(err error) *Error {
	if err == nil {
		return nil
	}
	return &Error{Code: fsmpb.Error_ERROR_INVALID_ARGUMENT, Msg: err.Error()}
}

// nanos is a duration in nanoseconds, as the log carries durations (the
// state machine keeps no time.Duration: it imports no time). It prints as
// package rules quotes durations ("1m30s").
type nanos int64

// millisecond and second in nanos.
const (
	millisecond nanos = 1e6
	second      nanos = 1e9
)

func (d nanos) String() string { return rules.FormatNanos(int64(d)) }

func invalid(format string, args ...any) *Error {
	return &Error{Code: fsmpb.Error_ERROR_INVALID_ARGUMENT, Msg: fmt.Sprintf(format, args...)}
}
