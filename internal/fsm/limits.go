package fsm

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Limits. Each bounds the memory or the work of one log entry, so that no
// single client can make every replica slow.
const (
	// MinTTL is the shortest session TTL: below a second, heartbeats,
	// elections and scheduling delay would expire healthy sessions.
	MinTTL = time.Second
	// MaxTTL is the longest session TTL: a crashed client keeps its locks
	// for up to a TTL, and ten minutes is the longest an operator should
	// have to wait (blacklisting and CAS release are faster).
	MaxTTL = 10 * time.Minute
	// DefaultTTL is the TTL of a session opened with ttl 0: long enough to
	// ride out a leader election and a GC pause, short enough that a dead
	// client's locks come back quickly (etcd's and Consul's defaults are of
	// this order).
	DefaultTTL = 10 * time.Second
	// MaxNameLen bounds a lock name in bytes: names are keys in every
	// replica's memory and in every snapshot, and 512 fits any path-like
	// name.
	MaxNameLen = 512
	// MaxOwnerLen bounds an owner label or owner key in bytes: it is copied
	// into every holder and waiter record for display.
	MaxOwnerLen = 256
	// MaxWaitersPerLock bounds one lock's FIFO queue, whose removals are
	// linear in its length.
	MaxWaitersPerLock = 10000
	// MaxHoldersPerLock bounds the holder limit of one lock (a semaphore's
	// permits, a read/write lock's readers): its holders are scanned on
	// every reentrant acquire and release.
	MaxHoldersPerLock = 10000
	// MinHoldLimit and MaxHoldLimit bound an acquire's hold limit: below
	// a second, renewals would race elections and pauses (as for TTLs);
	// a hold meant to last longer than a day needs no limit (the session
	// keeps it).
	MinHoldLimit = time.Second
	MaxHoldLimit = 24 * time.Hour
	// MaxPending bounds the cached results of one session (its
	// unacknowledged request window), which live in every snapshot.
	MaxPending = 1024
	// MaxAcquireMany bounds the locks of one AcquireMany, so one log entry
	// stays small and quick to apply.
	MaxAcquireMany = 1000
	// MaxHoldsPerSession bounds the locks one session holds or waits for at
	// once, which bounds the work of applying its expiry.
	MaxHoldsPerSession = 100000
)

// ValidateLockName returns nil if name can name a lock: 1..MaxNameLen bytes
// of valid UTF-8 without NUL or other control characters. Otherwise it
// returns an *Error matching ErrInvalidArgument.
func ValidateLockName(name string) error {
	if err := checkLockName(name); err != nil {
		return err
	}
	return nil
}

// ValidateOwner returns nil if owner can be a session's owner label or an
// owner key: 0..MaxOwnerLen bytes of valid UTF-8. Otherwise it returns an
// *Error matching ErrInvalidArgument.
func ValidateOwner(owner string) error {
	if err := checkLabel("owner", owner); err != nil {
		return err
	}
	return nil
}

// ValidateTTL returns nil if ttl is a valid session TTL (MinTTL..MaxTTL).
// Otherwise it returns an *Error matching ErrInvalidArgument. (OpenSession
// also accepts 0, meaning DefaultTTL.)
func ValidateTTL(ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return nil
}

// The check functions return a typed nil-able *Error for internal use; the
// exported wrappers convert to error without the typed-nil trap.

func checkLockName(name string) *Error {
	switch {
	case name == "":
		return invalid("lock name is empty")
	case len(name) > MaxNameLen:
		return invalid("lock name is %d bytes; the limit is %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return invalid("lock name %q is not valid UTF-8", name)
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return invalid("lock name %q has control character %U at byte %d", name, r, i)
		}
	}
	return nil
}

func checkLabel(what, s string) *Error {
	switch {
	case len(s) > MaxOwnerLen:
		return invalid("%s is %d bytes; the limit is %d", what, len(s), MaxOwnerLen)
	case !utf8.ValidString(s):
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	return nil
}

func checkTTL(ttl time.Duration) *Error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid("ttl %v is outside %v..%v", ttl, MinTTL, MaxTTL)
	}
	return nil
}

func invalid(format string, args ...any) *Error {
	return &Error{Code: fsmpb.Error_ERROR_INVALID_ARGUMENT, Msg: fmt.Sprintf(format, args...)}
}
