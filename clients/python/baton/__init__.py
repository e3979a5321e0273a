"""Baton's Python client: distributed locks with the Go client's safety.

    import baton
    client = baton.connect("127.0.0.1:7700,127.0.0.1:7710")
    with client.session(ttl=10, owner="worker-7") as session:
        with session.lock("jobs/42", timeout=5) as lease:
            do_work(lease.token)

A session keeps itself alive from a thread of its own and counts its
deadline from the send of each keepalive, less a safety margin, so that a
lease's ``lost`` event is set before any member can hand the lock on.
Requests keep their sequence numbers across retries and leader changes, so
each takes effect once. docs/PROTOCOL.md in the repository is the protocol.
"""

from baton import fence
from baton.client import Client, LockState, connect
from baton.errors import (Blacklisted, Cancelled, Deadlock, Error, FailedPrecondition, Holder, InvalidArgument, Jeopardy, LimitMismatch,
                          LockBusy, NotHeld, PermissionDenied, Released, ResourceExhausted, Revoked, SessionClosed,
                          SessionLost, Timeout, Unauthenticated, Unavailable)
from baton.keepalive import safety_margin
from baton.leases import Lease
from baton.locks import RWLock, Semaphore
from baton.revoke import Revocation
from baton.session import Session

__version__ = "0.1.0"

__all__ = [
    "Blacklisted", "Cancelled", "Client", "Deadlock", "Error", "FailedPrecondition", "Holder", "InvalidArgument", "Jeopardy", "Lease",
    "LimitMismatch", "LockBusy", "LockState", "NotHeld", "PermissionDenied", "RWLock", "Released",
    "ResourceExhausted", "Revocation", "Revoked", "Semaphore", "Session", "SessionClosed", "SessionLost", "Timeout",
    "Unauthenticated", "Unavailable", "connect", "fence", "safety_margin",
]
