"""Leases: every successful acquire's view of its hold, and the session's
table of them by hold (lock name, owner key). What ends a lease is decided
here: a release, the session's deadline passing (jeopardy), the session's
end, or the member ending the hold (an operator's conditional release, a
revoke's grace passing, a hold that was gone when the session resumed);
and which leases a revoke's request to let go reaches.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Optional

from baton.errors import Error, NotHeld, Released, Revoked, SessionClosed, SessionLost
from baton.revoke import Revocation

if TYPE_CHECKING:
    from baton.session import Session

HoldKey = tuple[str, str]  # (lock name, owner key)

# MAX_REVOKED_EARLY bounds LeaseTable.revoked_early: one per hold the
# session may be granted, which the member's limits bound; past it the
# oldest is dropped (that lease then learns of its revoke only when the
# leader ends the hold), as the Go client's maxRevokedEarly.
MAX_REVOKED_EARLY = 1024


class Lease:
    """One successful acquire: a hold of a lock by (session, owner key) with
    its fencing token. A reentrant acquire gives another Lease of the same
    hold (same token); each Lease releases one count.

    A lock can be lost at any time, and the client cannot always know at
    once. The Lease is the client's conservative view: valid until the
    session's deadline, which the client counts from the send of its last
    answered keepalive less a safety margin, so that it passes before any
    member can hand the lock to someone else. At that instant, on the
    session's end, on release, or when the member ends the hold, ``lost``
    (a threading.Event) is set for good and ``error`` says why. Check
    ``remaining()`` before a step that must finish under the lock, and let
    storage check ``token`` (see baton.fence): a process can pause after
    any check.

    An operator may ask the holder to let go (Client.revoke_lock):
    ``revoke_requested`` (a threading.Event) is then set and
    ``revocation`` says by when. The lease stays valid until the grace
    passes; a hold still there then is ended by the leader, and the lease
    is lost with Revoked.

    Used as a context manager, the Lease is released on exit.
    """

    def __init__(self, session: "Session", name: str, owner_key: str, token: int) -> None:
        self._session = session
        self._name = name
        self._owner_key = owner_key
        self._token = token
        self.lost = threading.Event()
        # Set once a revoke asked the hold to end; _revocation says which.
        self.revoke_requested = threading.Event()
        # Guarded by the session's lock.
        self._error: Optional[Error] = None
        self._released = False
        self._revocation: Optional[Revocation] = None

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._name

    @property
    def owner_key(self) -> str:
        """The owner key the hold belongs to within its session."""
        return self._owner_key

    @property
    def token(self) -> int:
        """The hold's fencing token: larger than the token of every earlier
        holder of this lock. Storage that keeps the largest token it saw and
        refuses smaller ones cannot be written by a holder that lost it."""
        return self._token

    @property
    def session(self) -> "Session":
        return self._session

    @property
    def error(self) -> Optional[Error]:
        """None while valid; then why the lease was lost: Jeopardy,
        SessionLost, SessionClosed, Released or NotHeld (Revoked, a
        NotHeld, when a revoke's grace ended the hold)."""
        with self._session._mu:
            return self._error

    @property
    def revocation(self) -> Optional[Revocation]:
        """The revoke that asked the hold to end, once revoke_requested is
        set: finish the step under way and release before its grace
        passes. None before. The session learns of a revoke when the
        member pushes it, or, if its stream was down, when it resumes."""
        with self._session._mu:
            return self._revocation

    def remaining(self) -> float:
        """Seconds the lease stays valid, in the client's conservative view,
        unless a keepalive answer extends it; 0 once lost."""
        s = self._session
        with s._mu:
            if self._error is not None:
                return 0.0
            return max(s._ka.deadline - time.monotonic(), 0.0)

    def valid(self) -> bool:
        """Whether the lease is valid now (remaining() > 0)."""
        return self.remaining() > 0

    def release(self, timeout: Optional[float] = None) -> None:
        """Release this lease's count of the hold (the hold ends at zero and
        the next waiter gets the lock). The request keeps its sequence
        number across retries and leader changes, so it takes effect once.
        If timeout passes first, Timeout is raised and the session goes on
        retrying. Releasing twice, or after the session ended, does nothing
        more; NotHeld means the member no longer had the hold."""
        self._session._release(self, timeout)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.release()
        except (SessionLost, SessionClosed):
            pass  # the session's end released every hold

    def __repr__(self) -> str:
        return (f"<baton.Lease {self._name!r} key={self._owner_key!r} token={self._token} "
                f"session={self._session.id}{' lost' if self.lost.is_set() else ''}>")


class LeaseTable:
    """The session's unreleased leases by hold, oldest first. Every method
    is called with the session's lock held."""

    def __init__(self) -> None:
        self.holds: dict[HoldKey, list[Lease]] = {}
        # A resume's list of holds, gathered until its last message.
        self.server_holds: Optional[dict[HoldKey, int]] = None
        # A revoke the session was told of for a hold it has no lease of
        # yet: the grant's answer is still to come (a retry after a lost
        # answer, answered after the resume listed the hold as being
        # revoked). The lease that answer makes starts revoked. Oldest
        # first (dicts keep their insertion order), at most
        # MAX_REVOKED_EARLY.
        self.revoked_early: dict[HoldKey, Revocation] = {}

    def add(self, lease: Lease) -> None:
        k = (lease.name, lease.owner_key)
        ls = self.holds.get(k, [])
        if ls and ls[0].token != lease.token:
            # The hold those leases had ended on the member: a new hold.
            for old in ls:
                end_lease(old, NotHeld(f"hold of {k[0]!r} (token {old.token}) ended on the server"))
            ls = []
        if ls:
            # Another count of a hold: its revoke too.
            if ls[0]._revocation is not None:
                _mark_revoked(lease, ls[0]._revocation)
        else:
            rev = self.revoked_early.get(k)
            if rev is not None and rev.token >= lease.token:
                if rev.token == lease.token:
                    _mark_revoked(lease, rev)
                del self.revoked_early[k]
        ls.append(lease)
        self.holds[k] = ls

    def revoke_requested(self, rev: Revocation) -> None:
        """A revoke asked the hold rev names to end: its leases are told.
        A revoke of another (older) hold, or of one already told, changes
        nothing; one of a hold the session has no lease of yet is kept for
        the lease its grant's answer will make."""
        k = (rev.name, rev.owner_key)
        ls = self.holds.get(k)
        if not ls or ls[0].token < rev.token:
            old = self.revoked_early.get(k)
            if old is None or old.token < rev.token:
                if old is None and len(self.revoked_early) >= MAX_REVOKED_EARLY:
                    del self.revoked_early[next(iter(self.revoked_early))]
                self.revoked_early[k] = rev
            return
        if ls[0].token != rev.token or ls[0]._revocation is not None:
            return
        for lease in ls:
            _mark_revoked(lease, rev)

    def end_all(self, cause: Error) -> None:
        """Every lease is lost with cause; the table keeps them, so that a
        release still asks the member."""
        for ls in self.holds.values():
            for lease in ls:
                end_lease(lease, cause)

    def remove(self, lease: Lease) -> None:
        k = (lease.name, lease.owner_key)
        ls = [x for x in self.holds.get(k, []) if x is not lease]
        if ls:
            self.holds[k] = ls
        else:
            self.holds.pop(k, None)

    def hold_lost(self, name: str, owner_key: str, token: int) -> None:
        """The member ended a hold without the session asking (hold_lost):
        its leases are lost with NotHeld."""
        k = (name, owner_key)
        ls = self.holds.get(k, [])
        if not ls or ls[0].token != token:
            return  # released meanwhile, or a newer hold
        rev = ls[0]._revocation
        cause: Error = NotHeld(f"hold of {name!r} (token {token}) ended by the server: an operator's conditional release")
        if rev is not None:
            cause = Revoked(f"hold of {name!r} (token {token}) ended by the leader when the revoke's grace "
                            f"({rev.grace:g}s) passed", revocation=rev)
        for lease in ls:
            end_lease(lease, cause)
        del self.holds[k]

    def server_holds_part(self, holds: list[tuple[str, str, int]], revoking: list[Revocation],
                          index: int, done: bool) -> None:
        """One message of a resumed session's holds, with those of them a
        revoke asked to end (the push the session may have missed). Once
        the list is whole, every lease of a hold granted at or before index
        that is not on it is lost: the hold ended while the stream was
        down."""
        if self.server_holds is None:
            self.server_holds = {}
        for name, key, token in holds:
            self.server_holds[(name, key)] = token
        for rev in revoking:
            self.revoke_requested(rev)
        if not done:
            return
        have, self.server_holds = self.server_holds, None
        for k, ls in list(self.holds.items()):
            tok = ls[0].token
            if tok > index or have.get(k) == tok:
                continue
            for lease in ls:
                end_lease(lease, NotHeld(f"hold of {k[0]!r} (token {tok}) ended while the session's stream was down"))
            del self.holds[k]


def _mark_revoked(lease: Lease, rev: Revocation) -> None:
    """Tell lease that a revoke asked its hold to end (the session's lock
    held)."""
    lease._revocation = rev
    lease.revoke_requested.set()


def end_lease(lease: Lease, cause: Error) -> None:
    """Mark lease lost with cause (the session's lock held)."""
    if lease._error is not None:
        return
    lease._error = cause
    lease.lost.set()


def released_error() -> Error:
    return Released("lease released")
