package fence

import (
	"errors"
	"fmt"
)

// ErrStale is matched (errors.Is) by every refusal of a token because a
// higher one was seen: a *StaleTokenError.
var ErrStale = errors.New("fence: stale token")

// ErrMalformed is matched by the error for a request whose fencing
// headers or metadata cannot be read: a token that is not a decimal
// number from 1 to 2^63-1, a lock name that is empty or badly escaped,
// a token without a lock or a lock without a token, or either given
// twice.
var ErrMalformed = errors.New("fence: malformed fencing claim")

// ErrNoToken is the error for a request that carries no fencing token to
// a server that requires one (RefuseUnfenced).
var ErrNoToken = errors.New("fence: request carries no fencing token")

// StaleTokenError is the refusal of a token lower than one already seen
// for the resource. It matches ErrStale.
type StaleTokenError struct {
	Resource string // the resource (lock name) written to
	Token    uint64 // the token offered
	Seen     uint64 // the highest token seen for the resource, or the floor
	// Forgotten: the Guard no longer remembers the resource and Seen is
	// its floor, the highest token of a resource it forgot.
	Forgotten bool
}

func (e *StaleTokenError) Error() string {
	if e.Forgotten {
		return fmt.Sprintf("fence: stale token %d for %q: below %d, the floor of resources the guard forgot; take the lock again for a new token", e.Token, e.Resource, e.Seen)
	}
	return fmt.Sprintf("fence: stale token %d for %q: token %d was seen; the lock has a newer holder", e.Token, e.Resource, e.Seen)
}

// Is reports whether target is ErrStale.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStale }
