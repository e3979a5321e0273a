// Package baton is the Go client of Baton, a distributed lock service.
//
//	client, err := baton.Dial(ctx, "10.0.0.1:7700,10.0.0.2:7700,10.0.0.3:7700")
//	session, err := client.NewSession(ctx, baton.WithTTL(10*time.Second))
//	defer session.Close(ctx)
//	lease, err := session.Mutex("jobs/42").Lock(waitCtx)
//	defer lease.Release(ctx)
//	err = doWork(lease.Context(), lease.Token())
//
// # Client
//
// Dial takes any members' addresses. Calls that need the leader follow it:
// a follower's NOT_LEADER answer carries the leader's address, an
// unreachable member sends the client to the next endpoint, and attempts
// are bounded (WithMaxAttempts) with a jittered backoff that honours ctx.
// Check, Get, List, Sessions, Blacklist, CasRelease and Status are the
// operator's calls.
//
// # Sessions and their deadline
//
// A Session is the liveness every hold and wait rides on. It keeps one
// stream to the leader, sends a keepalive on it every TTL/3, and pipelines
// its requests on it. The sessions of one Client share one gRPC stream per
// member (each is a channel of it), so a process with many sessions sends
// and receives their traffic in few messages: prefer one Client per
// process. Every mutating request carries the session's next
// sequence number (from 1) and the lowest sequence number still without a
// final answer; after a stream breaks or the leader changes, the session
// resumes on the new leader and sends every unanswered request again with
// its original sequence number, so each takes effect exactly once (a
// queued Lock that was granted meanwhile learns its grant).
//
// The client keeps its own, conservative deadline for the session:
// sendTime + TTL - SafetyMargin(TTL), where sendTime is the monotonic time
// the newest answered keepalive was queued for sending. The server counts
// from when it received that keepalive, and hands a lock on only after
// its deadline passed and the expiry was committed, so the client always
// declares the loss first (measured by TestClientDeclaresLossBeforeHandoff).
// The margin, max(1% of TTL, 50ms) + 50ms, covers a difference in clock
// rate between client and leader and the client's own scheduling delay in
// noticing the deadline.
//
// # Session states
//
// Like Chubby's, as events (WithEvents) and State:
//
//   - healthy: the deadline lies ahead.
//   - jeopardy: the deadline passed with no answer. Every Lease is lost at
//     once (Context cancelled with ErrJeopardy, Lost closed).
//   - safe: an answer came back in time and the server still had the
//     session; it is healthy again. Lost leases stay lost; their holds
//     still exist on the server until released.
//   - expired: the server ended the session (or refused it, or the client
//     could not reach the cluster for a further TTL). Every waiter fails
//     at once with ErrSessionLost.
//   - closed: Session.Close released everything.
//
// # Locks, reentrancy and leases
//
// Session.Mutex returns a handle on a lock for an owner key. A Go program
// has no thread identity, so reentrancy belongs to (session, owner key),
// which the caller controls: a Lock by the same session and key re-enters
// the hold (count + 1, same token); another key of the same session waits
// like anyone else. The default key is "", so by default a session is one
// owner.
//
// Lock waits in the server's FIFO queue; ctx bounds the wait (a cancelled
// wait leaves the queue, and a grant that won the race is released), never
// the hold. TryLock answers at once (ErrLockBusy, a *BusyError naming the
// holder). LockWithin waits up to a duration, enforced by the leader.
//
// Each acquire returns a Lease: the fencing token, the time left before
// the client's deadline, a Lost channel and a Context for the work done
// under the lock. A lock can be lost at any time. Check Remaining before a
// step that must finish under the lock, run the work under Context, and
// make storage check the token: only fencing stops a process that paused
// after its last check.
//
// # Errors
//
// Errors answered by the server are *Error values carrying the server's
// Reason; errors.Is matches them against this package's sentinels
// (ErrNotHeld, ErrLockBusy, ErrSessionLost, ErrBlacklisted, ...) through
// one table, never by message.
//
// The client checks every request before it sends it, with the rules the
// members apply (package rules: lock names, owner labels and keys, TTLs,
// hold and holder limits, batches, wait timeouts, member names). A request
// that breaks one fails at once, alone, with an error matching
// ErrInvalidArgument that names the value and what is wrong with it;
// nothing is sent, and the client's other sessions never notice.
package baton
