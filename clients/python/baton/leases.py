"""Leases: every successful acquire's view of its hold, and the session's
table of them by hold (lock name, owner key). What ends a lease is decided
here: a release, the session's deadline passing (jeopardy), the session's
end, or the member ending the hold (an operator's conditional release, a
hold that was gone when the session resumed).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Optional

from baton.errors import Error, NotHeld, Released, SessionClosed, SessionLost

if TYPE_CHECKING:
    from baton.session import Session

HoldKey = tuple[str, str]  # (lock name, owner key)


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

    Used as a context manager, the Lease is released on exit.
    """

    def __init__(self, session: "Session", name: str, owner_key: str, token: int) -> None:
        self._session = session
        self._name = name
        self._owner_key = owner_key
        self._token = token
        self.lost = threading.Event()
        # Guarded by the session's lock.
        self._error: Optional[Error] = None
        self._released = False

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
        SessionLost, SessionClosed, Released or NotHeld."""
        with self._session._mu:
            return self._error

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

    def add(self, lease: Lease) -> None:
        k = (lease.name, lease.owner_key)
        ls = self.holds.get(k, [])
        if ls and ls[0].token != lease.token:
            # The hold those leases had ended on the member: a new hold.
            for old in ls:
                end_lease(old, NotHeld(f"hold of {k[0]!r} (token {old.token}) ended on the server"))
            ls = []
        ls.append(lease)
        self.holds[k] = ls

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
        for lease in ls:
            end_lease(lease, NotHeld(f"hold of {name!r} (token {token}) ended by the server"))
        del self.holds[k]

    def server_holds_part(self, holds: list[tuple[str, str, int]], index: int, done: bool) -> None:
        """One message of a resumed session's holds. Once the list is whole,
        every lease of a hold granted at or before index that is not on it
        is lost: the hold ended while the stream was down."""
        if self.server_holds is None:
            self.server_holds = {}
        for name, key, token in holds:
            self.server_holds[(name, key)] = token
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


def end_lease(lease: Lease, cause: Error) -> None:
    """Mark lease lost with cause (the session's lock held)."""
    if lease._error is not None:
        return
    lease._error = cause
    lease.lost.set()


def released_error() -> Error:
    return Released("lease released")
