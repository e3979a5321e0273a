// Package fsm is Baton's lock state machine: sessions, locks, their holders
// and FIFO waiters, fencing tokens and the exactly-once cache of each
// session's replies.
//
// A Machine is a pure value. Its only doors are Apply (one log entry in, one
// fsmpb.Result out), SetApplied (an entry without a command), and
// Snapshot/Restore. It reads no clock, randomness, disk or network, logs
// nothing, starts no goroutines and takes no locks, so the same log gives
// the same state and the same snapshot bytes on every replica. Freeze is
// Snapshot in two halves: it marks the state of now, which another
// goroutine encodes (Frozen.Encode) while Apply goes on, each on records
// the other never changes (copy-on-write, frozen.go). Time enters only as
// explicit commands decided by the leader (ExpireSession, CancelWait with
// timed_out), as durations in nanoseconds, and as wall-clock fields that
// are shown to people and never decide anything.
//
// # Tokens
//
// The fencing token of a grant is the index of the log entry that granted it.
// Locks granted by the same entry (a release that wakes the next waiter, an
// expiry that hands several locks on, an AcquireMany) share that token, so a
// token is unique per lock and strictly increasing across the holders of a
// lock. Re-entry keeps the token.
//
// # Exactly once
//
// A command with session_id != 0 and seq != 0 is deduplicated. Per session
// the machine keeps min_unacked_seq (the highest the client has told it) and
// the results of the sequences at or above it. A seq below min_unacked_seq is
// refused as ERROR_STALE_SEQUENCE; a seq with a cached result gets a copy of
// that result and has no effect; otherwise the command is applied and its
// result (without the side-effect lists grants, waits_ended, sessions_ended
// and holds_ended, nor what it reports to the leader's liveness tracker) is
// cached. At most MaxPending results are kept per session:
// a new command that would need a further slot is refused with
// ERROR_TOO_MANY_PENDING before it is applied. The cached result of a queued
// Acquire is updated in place when the waiter is granted or leaves the queue,
// so a retry learns the current outcome. A command that ends its own session
// (CloseSession) leaves nothing to cache: a retry gets
// ERROR_SESSION_NOT_FOUND.
//
// A retried Acquire answered from the cache marks that cached result
// claimed (kept in snapshots), and so does the session's own CancelWait
// answered with the acquire's grant: the client may now act on the answer. A
// server whose caller of a queued Acquire went away undoes it with one
// CancelWait marked abandoned, which removes the waiter, or, if the grant
// won the race, drops one count of the hold that acquire got and rewrites
// its cached result to ERROR_WAIT_CANCELLED, all in one entry. It has no
// effect (ERROR_NOT_WAITING) once the request is claimed, or once its
// cached result is forgotten: a retry can never be told GRANTED for a hold
// that a later entry of the same request ends.
//
// # Choices where DESIGN.md is silent
//
//   - An Acquire with wait=true needs seq != 0: the waiter is named by
//     (session, seq) for CancelWait and for the grant. wait_timeout_nanos
//     is ignored when wait is false.
//   - A session that waits again for a lock under the same owner_key while
//     it already waits for it gets a second, independent waiter (its own
//     acquire seq). Each is granted, cancelled or timed out on its own.
//   - A session that holds a lock and acquires it with another owner_key is
//     a different owner: it gets BUSY or queues behind the other keys.
//   - MaxHoldsPerSession bounds holds plus waits of a session, so granting a
//     waiter never exceeds it. AcquireMany checks the bound up front as if
//     every requested lock it does not hold yet were granted.
//   - Blacklisting a session also ends its waits (WaitEnded with
//     ERROR_BLACKLISTED): a blacklisted session may not acquire, and a
//     waiter granted to it would only hold the lock until its expiry. Its
//     current holds stay until release, CAS release, close or expiry.
//   - OpenSession with ttl_nanos 0 gets rules.DefaultTTL.
//   - min_unacked_seq 0 means seq; a min_unacked_seq above seq is taken as
//     seq (the command being applied cannot have been acknowledged yet).
//   - A session expiring or closing drops its waiters before it releases its
//     holds, so none of its own waiters is granted a lock it is letting go.
//     Its waits end in (lock name, acquire seq) order and its locks are
//     handed on in lock name order, so the side-effect lists are
//     deterministic.
package fsm
