// Package rules is the one table of what a request to Baton may contain:
// the limits of names, owner labels and keys, TTLs, hold and holder
// limits, batches, waits, session secrets and member names, and the
// checks that apply them. Clients check a request with it before they
// send it, the API before it proposes it, and the state machine when it
// applies it, so all three refuse the same values in the same words.
//
// It needs nothing but the standard library and imports nothing of
// Baton's (internal/archtest keeps it so), so that a client can take it
// along when it becomes a module of its own.
package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits. Each bounds the memory or the work of one request or log
// entry, so that no single client can make every replica slow.
const (
	// MinTTL is the shortest session TTL: below a second, heartbeats,
	// elections and scheduling delay would expire healthy sessions.
	MinTTL = time.Second
	// MaxTTL is the longest session TTL: a crashed client keeps its locks
	// for up to a TTL, and ten minutes is the longest an operator should
	// have to wait (blacklisting and CAS release are faster).
	MaxTTL = 10 * time.Minute
	// DefaultTTL is the TTL of a session opened without one: long enough
	// to ride out a leader election and a GC pause, short enough that a
	// dead client's locks come back quickly (etcd's and Consul's defaults
	// are of this order).
	DefaultTTL = 10 * time.Second
	// MaxNameLen bounds a lock name in bytes: names are keys in every
	// replica's memory and in every snapshot, and 512 fits any path-like
	// name.
	MaxNameLen = 512
	// MaxOwnerLen bounds an owner label or owner key in bytes: it is copied
	// into every holder and waiter record for display.
	MaxOwnerLen = 256
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
	// MaxLockDelay bounds a hold's lock-delay (after the hold ends by
	// expiry, its lock is granted to no one that long): Consul's bound. A
	// delay is kept in whole seconds (a holder record has one byte for
	// it), and a resource that needs its writes drained for longer than
	// a minute needs fencing, not a longer pause of the lock.
	MaxLockDelay = 60 * time.Second
	// MinRevokeGrace and MaxRevokeGrace bound a revocation's grace (how
	// long a holder asked to let go has before the leader ends its hold):
	// below a second, the holder could not hear of it before its hold
	// ends (that is a CasRelease); a holder that needs more than an hour
	// to finish is better asked again. DefaultRevokeGrace is a request's
	// that states none: time for a command to finish and release.
	MinRevokeGrace     = time.Second
	MaxRevokeGrace     = time.Hour
	DefaultRevokeGrace = 30 * time.Second
	// DefaultKeyRetention is how long a signing key rotated out still
	// verifies when the rotation states no retention: a day, so that the
	// signed tokens of holds granted before a routine rotation keep
	// verifying while their holders finish. MaxKeyRetention bounds it: a
	// retired key stays in every snapshot and in GET /v1/keys as long.
	DefaultKeyRetention = 24 * time.Hour
	MaxKeyRetention     = 30 * 24 * time.Hour
	// MaxAcquireMany bounds the locks of one AcquireMany, so one log entry
	// stays small and quick to apply.
	MaxAcquireMany = 1000
	// MaxWaitTimeout bounds an acquire's wait timeout: a longer wait is
	// better expressed as "until cancelled".
	MaxWaitTimeout = 24 * time.Hour
	// MinSecretLen and MaxSecretLen bound a session secret a client
	// chooses: 22 base64 characters carry 128 bits.
	MinSecretLen = 22
	MaxSecretLen = 128
	// DefaultPageSize and MaxPageSize bound the pages of List and
	// ListSessions.
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// MaxMemberNameLen bounds a member's name: names become Raft ids and
	// --initial-cluster entries.
	MaxMemberNameLen = 64
	// MaxRequestBytes bounds one request message as a member receives it
	// (one batch of a Sessions stream too): a member refuses a bigger one
	// before reading it, and on a stream that ends the stream.
	MaxRequestBytes = 1 << 20
	// MaxHoldValueLen bounds a hold's value in bytes (an election's
	// leader publishes its address or id in it): it lives in the hold's
	// record in every replica and every snapshot, and is sent to every
	// watcher of the lock on each change.
	MaxHoldValueLen = 1024
)

// Error is a value a request may not contain. Msg names the value and
// says what is wrong with it, the same words wherever the check runs
// ("lock name is empty"). Every check of this package returns nil or an
// *Error.
type Error struct {
	Msg string
}

// Error returns Msg: callers put their own prefix before it (the Go
// client's "baton: invalid argument: ", the state machine's "fsm: ").
func (e *Error) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// CheckLockName returns nil if name can name a lock: 1..MaxNameLen bytes
// of valid UTF-8 without NUL or other control characters.
func CheckLockName(name string) error {
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

// CheckLockNames returns nil if names can be the locks of one
// AcquireMany: 1..MaxAcquireMany lock names, none twice.
func CheckLockNames(names []string) error {
	switch {
	case len(names) == 0:
		return invalid("acquire_many names no lock")
	case len(names) > MaxAcquireMany:
		return invalid("acquire_many names %d locks; the limit is %d", len(names), MaxAcquireMany)
	}
	seen := make(map[string]int, len(names))
	for i, name := range names {
		if err := CheckLockName(name); err != nil {
			return invalid("lock %d of %d: %s", i+1, len(names), err)
		}
		if j, dup := seen[name]; dup {
			return invalid("lock %q is named twice (positions %d and %d)", name, j+1, i+1)
		}
		seen[name] = i
	}
	return nil
}

// CheckSetModes returns nil if an AcquireMany of names locks, stating
// shared and limit for all of them, may also state modes modes (a mode
// per lock, each with its own shared and limit): none, or one per lock
// with the set's own shared and limit unset. Each mode's limit is checked
// as CheckHolderLimit.
func CheckSetModes(names, modes int, shared bool, limit uint32) error {
	switch {
	case modes == 0:
		return nil
	case modes != names:
		return invalid("acquire_many gives %d modes for %d locks; want one per lock, or none", modes, names)
	case shared || limit != 0:
		return invalid("acquire_many gives a mode per lock and also shared or limit for all of them; leave shared and limit unset")
	}
	return nil
}

// CheckOwner returns nil if label can be a session's owner label:
// 0..MaxOwnerLen bytes of valid UTF-8.
func CheckOwner(label string) error { return checkLabel("owner", label) }

// CheckOwnerKey returns nil if key can be an owner key, as CheckOwner.
func CheckOwnerKey(key string) error { return checkLabel("owner key", key) }

func checkLabel(what, s string) error {
	switch {
	case len(s) > MaxOwnerLen:
		return invalid("%s is %d bytes; the limit is %d", what, len(s), MaxOwnerLen)
	case !utf8.ValidString(s):
		return invalid("%s %q is not valid UTF-8", what, s)
	}
	return nil
}

// CheckHoldValue returns nil if value can be a hold's value (an
// election's leader's, Proclaim): at most MaxHoldValueLen bytes of valid
// UTF-8 without control characters, so that it prints on one line.
func CheckHoldValue(value string) error {
	switch {
	case len(value) > MaxHoldValueLen:
		return invalid("hold value is %d bytes; the limit is %d (rules.MaxHoldValueLen)", len(value), MaxHoldValueLen)
	case !utf8.ValidString(value):
		return invalid("hold value %q is not valid UTF-8", value)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return invalid("hold value %q has a control character", value)
	}
	return nil
}

// MaxAuthNameLen bounds a user's or a role's name: users are matched with
// certificates' common names, which are at most 64 characters, and both
// live in every snapshot.
const MaxAuthNameLen = 128

// CheckAuthName returns nil if name can name a user or a role (what says
// which): 1..MaxAuthNameLen bytes of UTF-8 without control characters.
func CheckAuthName(what, name string) error {
	switch {
	case name == "" || len(name) > MaxAuthNameLen:
		return invalid("%s name is %d bytes; it must have 1..%d", what, len(name), MaxAuthNameLen)
	case !utf8.ValidString(name):
		return invalid("%s name %q is not valid UTF-8", what, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalid("%s name %q has a control character", what, name)
	}
	return nil
}

// CheckTTL returns nil if ttl is a session TTL: MinTTL..MaxTTL. (An open
// that states none gets DefaultTTL.)
func CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid("ttl %v is outside %v..%v", ttl, MinTTL, MaxTTL)
	}
	return nil
}

// CheckTTLNanos is CheckTTL of a TTL in nanoseconds, as the log carries
// it: the state machine keeps durations so and imports no time.
func CheckTTLNanos(ttl int64) error { return CheckTTL(time.Duration(ttl)) }

// FormatNanos writes a duration in nanoseconds as the checks of this
// package quote durations (time.Duration's String: "1m30s"), for the state
// machine's refusals.
func FormatNanos(d int64) string { return time.Duration(d).String() }

// CheckHolderLimit returns nil if limit can be the holder limit an acquire
// states: 0..MaxHoldersPerLock, 0 meaning 1 (a mutex).
func CheckHolderLimit(limit uint32) error {
	if limit > MaxHoldersPerLock {
		return invalid("holder limit %d is over the maximum %d", limit, MaxHoldersPerLock)
	}
	return nil
}

// CheckHoldLimit returns nil if d can be an acquire's hold limit: 0 (none),
// or MinHoldLimit..MaxHoldLimit in whole milliseconds.
func CheckHoldLimit(d time.Duration) error {
	switch {
	case d == 0:
		return nil
	case d < MinHoldLimit || d > MaxHoldLimit:
		return invalid("hold limit %v is outside %v..%v", d, MinHoldLimit, MaxHoldLimit)
	case d%time.Millisecond != 0:
		return invalid("hold limit %v is not a whole number of milliseconds", d)
	}
	return nil
}

// CheckHoldLimitNanos is CheckHoldLimit of a hold limit in nanoseconds,
// as the log carries it.
func CheckHoldLimitNanos(d int64) error { return CheckHoldLimit(time.Duration(d)) }

// CheckLockDelay returns nil if d can be a hold's lock-delay: 0 (none),
// or up to MaxLockDelay in whole seconds.
func CheckLockDelay(d time.Duration) error {
	switch {
	case d < 0 || d > MaxLockDelay:
		return invalid("lock-delay %v is outside 0s..%v", d, MaxLockDelay)
	case d%time.Second != 0:
		return invalid("lock-delay %v is not a whole number of seconds", d)
	}
	return nil
}

// CheckLockDelayNanos is CheckLockDelay of a lock-delay in nanoseconds,
// as the log carries it.
func CheckLockDelayNanos(d int64) error { return CheckLockDelay(time.Duration(d)) }

// CheckRevokeGrace returns nil if d can be a revocation's grace:
// MinRevokeGrace .. MaxRevokeGrace in whole milliseconds.
func CheckRevokeGrace(d time.Duration) error {
	switch {
	case d < MinRevokeGrace || d > MaxRevokeGrace:
		return invalid("revoke grace %v is outside %v..%v", d, MinRevokeGrace, MaxRevokeGrace)
	case d%time.Millisecond != 0:
		return invalid("revoke grace %v is not a whole number of milliseconds", d)
	}
	return nil
}

// CheckRevokeGraceNanos is CheckRevokeGrace of a grace in nanoseconds,
// as the log carries it.
func CheckRevokeGraceNanos(d int64) error { return CheckRevokeGrace(time.Duration(d)) }

// CheckKeyRetention returns nil if d can be how long a rotated-out
// signing key still verifies: 0 (not at all: a key whose seed was
// exposed) up to MaxKeyRetention.
func CheckKeyRetention(d time.Duration) error {
	if d < 0 || d > MaxKeyRetention {
		return invalid("key retention %v is outside 0s..%v", d, MaxKeyRetention)
	}
	return nil
}

// CheckKeyRetentionNanos is CheckKeyRetention of a retention in
// nanoseconds, as the log carries it.
func CheckKeyRetentionNanos(d int64) error { return CheckKeyRetention(time.Duration(d)) }

// CheckWaitTimeout returns nil if d can bound an acquire's wait: more
// than 0, at most MaxWaitTimeout.
func CheckWaitTimeout(d time.Duration) error {
	if d <= 0 || d > MaxWaitTimeout {
		return invalid("wait timeout %v is outside (0s, %v]", d, MaxWaitTimeout)
	}
	return nil
}

// CheckSecret returns nil if secret can be a session secret a client
// chooses: MinSecretLen..MaxSecretLen printable ASCII characters.
func CheckSecret(secret string) error {
	if n := len(secret); n < MinSecretLen || n > MaxSecretLen {
		return invalid("secret is %d characters; a session secret has %d to %d (or leave it unset and the server draws one)",
			n, MinSecretLen, MaxSecretLen)
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c < 0x21 || c > 0x7e {
			return invalid("secret has a character that is not printable ASCII at byte %d", i)
		}
	}
	return nil
}

// CheckPrefix returns nil if prefix can select locks by name (List):
// 0..MaxNameLen bytes of valid UTF-8.
func CheckPrefix(prefix string) error {
	switch {
	case len(prefix) > MaxNameLen:
		return invalid("prefix is %d bytes; the limit is %d", len(prefix), MaxNameLen)
	case !utf8.ValidString(prefix):
		return invalid("prefix %q is not valid UTF-8", prefix)
	}
	return nil
}

// CheckMemberName returns nil if name can name a member: 1..64 ASCII
// letters, digits, '-', '_' and '.'.
func CheckMemberName(name string) error {
	if name == "" || len(name) > MaxMemberNameLen {
		return invalid("member name %q: want 1..%d characters", name, MaxMemberNameLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return invalid("member name %q: only letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// CheckPeerAddr returns nil if addr can be a member's peer address:
// host:port (net.SplitHostPort's syntax, an IPv6 host in brackets) with a
// host and a port in 1..65535.
func CheckPeerAddr(addr string) error {
	_, err := checkHostPort("peer address", addr)
	return err
}

// checkHostPort returns addr's host if addr is host:port with a host and
// a port in 1..65535; what names the address in the error.
func checkHostPort(what, addr string) (string, error) {
	host, port, ok := splitHostPort(addr)
	if !ok || host == "" || !utf8.ValidString(host) {
		return "", invalid("%s %q: want host:port", what, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", invalid("%s %q: port must be 1..65535", what, addr)
	}
	return host, nil
}

// CheckClientAddr returns nil if addr can be the client address a member
// tells others, and clients dial: what CheckPeerAddr takes, with a host
// that is not the unspecified address (0.0.0.0, ::), which a member bound
// to every interface would otherwise announce and no client can dial.
func CheckClientAddr(addr string) error {
	host, err := checkHostPort("client address", addr)
	if err != nil {
		return err
	}
	if isUnspecified(host) {
		return invalid("client address %q: %s is every address of the machine, none to dial: give one that clients reach it at", addr, host)
	}
	return nil
}

// isUnspecified reports whether host is the unspecified address as
// net.ParseIP reads it: 0.0.0.0, or an IPv6 address of zeros only ("::",
// "0:0:0:0:0:0:0:0"). This package does not import net.
func isUnspecified(host string) bool {
	return host == "0.0.0.0" || strings.Contains(host, ":") && strings.Trim(host, "0:") == ""
}

// splitHostPort splits as net.SplitHostPort does (TestSplitHostPort
// compares them); this package does not import net, which the state
// machine may not depend on.
func splitHostPort(hostport string) (host, port string, ok bool) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return "", "", false
	}
	j, k := 0, 0
	if hostport[0] == '[' {
		end := strings.IndexByte(hostport, ']')
		if end < 0 || end+1 != i {
			return "", "", false
		}
		host, j, k = hostport[1:end], 1, end+1
	} else {
		host = hostport[:i]
		if strings.IndexByte(host, ':') >= 0 {
			return "", "", false
		}
	}
	if strings.IndexByte(hostport[j:], '[') >= 0 || strings.IndexByte(hostport[k:], ']') >= 0 {
		return "", "", false
	}
	return host, hostport[i+1:], true
}
