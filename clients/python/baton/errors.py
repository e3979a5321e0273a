"""Baton's exceptions: one hierarchy under baton.Error.

A member's answer carries a gRPC status code and a Reason (docs/PROTOCOL.md,
section 9); ``from_wire`` maps the Reason (or, without one, the code) to one
class here through one table, never by reading the message. No exception
ever carries a session's secret: the members never put it in a message, and
this library never does either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from baton._pb import pb

if TYPE_CHECKING:
    from baton.revoke import Revocation

# gRPC status codes, as the wire's Error.code carries them.
CANCELLED = 1
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
UNAVAILABLE = 14
UNAUTHENTICATED = 16
INVALID_ARGUMENT = 3


@dataclass(frozen=True)
class Holder:
    """A holder of a lock as a member reported it."""

    session_id: int
    owner: str
    owner_key: str
    token: int
    count: int = 1
    shared: bool = False

    @staticmethod
    def from_pb(h: "pb.Holder") -> "Holder":
        return Holder(session_id=h.session_id, owner=h.owner, owner_key=h.owner_key,
                      token=h.token, count=h.count, shared=h.shared)


class Error(Exception):
    """Every error of this library. Errors a member answered carry its code,
    Reason (the enum's name, "" when none), message and, for NOT_LEADER, the
    leader's client address."""

    def __init__(self, message: str, *, code: int = 0, reason: str = "",
                 leader_addr: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.leader_addr = leader_addr

    def __str__(self) -> str:
        return f"{self.message} ({self.reason})" if self.reason else self.message


class LockBusy(Error):
    """try_lock (or a try_acquire) found the lock held by someone else;
    ``holder`` names the holder (None if the member did not say)."""

    def __init__(self, name: str, holder: Optional[Holder]) -> None:
        if holder is None:
            msg = f"lock {name!r} is busy"
        else:
            msg = (f"lock {name!r} is busy: held by session {holder.session_id} "
                   f"({holder.owner!r}, key {holder.owner_key!r}) with token {holder.token}")
        super().__init__(msg)
        self.name = name
        self.holder = holder


class NotHeld(Error):
    """A release named a hold the session does not have (NOT_HOLDER,
    LOCK_NOT_FOUND, TOKEN_MISMATCH), or the member ended the hold (HOLD_LOST,
    an operator's conditional release)."""


class Revoked(NotHeld):
    """Why a lease was lost when the leader ended its hold because a
    revoke's grace passed before the holder let go (Client.revoke_lock).
    ``revocation`` is the revoke the lease had been told of."""

    def __init__(self, message: str, *, revocation: "Optional[Revocation]" = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.revocation = revocation


class SessionLost(Error):
    """The session is gone: it expired, the member no longer knows it, or
    the client gave up reaching the cluster a TTL past its deadline. Every
    lease of it is lost and every call on it fails."""


class Blacklisted(SessionLost):
    """An operator blacklisted the session (BLACKLISTED): it will expire."""


class SessionClosed(Error):
    """The session was closed (Session.close, Client.close); calls made on
    it afterwards fail with this."""


class Jeopardy(Error):
    """Why a lease was lost when the session's conservative deadline passed
    without a keepalive answer: the leader may hand the lock on soon."""


class Released(Error):
    """Why a lease is no longer valid once it was released."""


class Timeout(Error):
    """A wait ended unserved (WAIT_TIMED_OUT), or a call's own timeout
    passed first."""


class Cancelled(Error):
    """A wait was cancelled on the member (WAIT_CANCELLED)."""


class PermissionDenied(Error):
    """The request may not act as it asked: a wrong session secret
    (SECRET_MISMATCH) or a user without the permission (NOT_PERMITTED)."""


class Unauthenticated(Error):
    """Authentication is on and the client showed no credential that names
    a user (NO_CREDENTIALS)."""


class InvalidArgument(Error):
    """The request was refused as malformed, by the library before sending
    or by the member (INVALID_ARGUMENT). Nothing changed."""


class FailedPrecondition(Error):
    """The request does not fit the state: a cancel found no such waiter
    (NOT_WAITING), or a sequence number was already forgotten
    (STALE_SEQUENCE: a bug in this client)."""


class LimitMismatch(FailedPrecondition):
    """The lock is of another kind or size than the acquire states, or a
    reentrant acquire asks for the other mode (LIMIT_MISMATCH)."""


class ResourceExhausted(Error):
    """A limit was reached (TOO_MANY_WAITERS, TOO_MANY_PENDING,
    TOO_MANY_HOLDS, TOO_MANY_SESSIONS, NO_SPACE, OVERLOADED). Nothing
    changed."""


class Deadlock(Error):
    """The acquire's wait would have closed a deadlock (DEADLOCK): nothing
    was queued. ``cycle`` lists the waits, the refused one first, as
    ``pb.DeadlockEdge`` messages (session_id, owner_key, lock,
    queued_ahead, blocker_session_id, blocker_owner_key); the message
    names them in one line. Release what the session holds and start
    again."""

    def __init__(self, message: str, *, cycle: "list[pb.DeadlockEdge] | None" = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.cycle = list(cycle or [])


class Unavailable(Error):
    """No member could serve the call: not the leader (NOT_LEADER), the
    outcome is unknown (OUTCOME_UNKNOWN), or the connection failed. Session
    requests are retried with their sequence number and show this only once
    the retries ran out."""


_R = pb.Reason
# The one table from Reasons to classes (docs/PROTOCOL.md, section 9).
_BY_REASON: dict[int, type[Error]] = {
    _R.INVALID_ARGUMENT: InvalidArgument,
    _R.SESSION_NOT_FOUND: SessionLost,
    _R.SESSION_EXPIRED: SessionLost,
    _R.LOCK_NOT_FOUND: NotHeld,
    _R.NOT_HOLDER: NotHeld,
    _R.TOKEN_MISMATCH: NotHeld,
    _R.HOLD_LOST: NotHeld,
    _R.BLACKLISTED: Blacklisted,
    _R.SECRET_MISMATCH: PermissionDenied,
    _R.NOT_PERMITTED: PermissionDenied,
    _R.NO_CREDENTIALS: Unauthenticated,
    _R.TOO_MANY_WAITERS: ResourceExhausted,
    _R.TOO_MANY_PENDING: ResourceExhausted,
    _R.TOO_MANY_HOLDS: ResourceExhausted,
    _R.TOO_MANY_SESSIONS: ResourceExhausted,
    _R.NO_SPACE: ResourceExhausted,
    _R.OVERLOADED: ResourceExhausted,
    _R.LIMIT_MISMATCH: LimitMismatch,
    _R.STALE_SEQUENCE: FailedPrecondition,
    _R.NOT_WAITING: FailedPrecondition,
    _R.WAIT_TIMED_OUT: Timeout,
    _R.WAIT_CANCELLED: Cancelled,
    _R.NOT_LEADER: Unavailable,
    _R.OUTCOME_UNKNOWN: Unavailable,
    _R.DEADLOCK: Deadlock,
}

# Codes of errors without a Reason (transport failures and the like).
_BY_CODE: dict[int, type[Error]] = {
    UNAVAILABLE: Unavailable,
    INVALID_ARGUMENT: InvalidArgument,
    PERMISSION_DENIED: PermissionDenied,
    UNAUTHENTICATED: Unauthenticated,
    RESOURCE_EXHAUSTED: ResourceExhausted,
    DEADLINE_EXCEEDED: Timeout,
    FAILED_PRECONDITION: FailedPrecondition,
    CANCELLED: Cancelled,
}


def make_error(code: int, reason: int, message: str, leader_addr: str = "") -> Error:
    """The exception for a member's answer: by Reason, else by code."""
    cls = _BY_REASON.get(reason) if reason else None
    if cls is None:
        cls = _BY_CODE.get(code, Error)
    name = pb.Reason.Name(reason) if reason in pb.Reason.values() and reason else ""
    return cls(message, code=code, reason=name, leader_addr=leader_addr)


def describe_cycle(cycle: "list[pb.DeadlockEdge]") -> str:
    """One line naming each wait of a deadlock, as the member's own
    DEADLOCK refusal does: 'deadlock: session 7 waits for lock "y" held by
    session 8, ...'."""
    def node(session: int, key: str) -> str:
        return f"session {session}" if not key else f"session {session} key {json.dumps(key)}"
    return "deadlock: " + ", ".join(
        f"{node(e.session_id, e.owner_key)} waits for lock {json.dumps(e.lock)}"
        f"{' behind ' if e.queued_ahead else ' held by '}{node(e.blocker_session_id, e.blocker_owner_key)}"
        for e in cycle)


def from_wire(e: "pb.Error") -> Error:
    """The exception for a stream answer's Error."""
    err = make_error(e.code, e.reason, e.message, e.leader_addr)
    if isinstance(err, Deadlock):
        err.cycle = list(e.deadlock_cycle)
    return err


def is_retryable(err: Error) -> bool:
    """Whether a session request that got err is sent again with the same
    sequence number: the member did not lead, lost leadership before the
    outcome was known, or shed load."""
    return isinstance(err, Unavailable) or err.reason == "OVERLOADED"


def is_session_gone(err: Error) -> bool:
    """Whether err says the member no longer has the session."""
    return err.reason in ("SESSION_NOT_FOUND", "SESSION_EXPIRED")
