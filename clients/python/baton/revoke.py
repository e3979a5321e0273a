"""Cooperative revocation (revoke.go in the Go client): an operator asks
the holder of a lock to let go (Client.revoke_lock); the holder's leases
are told at once (Lease.revoke_requested, Lease.revocation), and if the
hold has not ended when the grace passes, the leader ends it, fenced like
any end: the lease is lost with Revoked (a NotHeld), client.check of its
token answers False, and the next holder's token is larger.

This module holds what a revocation is and the operator's call; which
lease a revoke reaches is decided in the lease table (leases.py).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from baton import rules
from baton._pb import pb
from baton.errors import InvalidArgument

if TYPE_CHECKING:
    from baton.client import Client

Grace = Union[float, int, datetime.timedelta]


@dataclass(frozen=True)
class Revocation:
    """A revoke's request that a hold end.

    ``grace`` is how long the holder had from the revoke to let go, in
    seconds; ``deadline`` when the leader ends the hold unless it is
    released first: the revoking leader's wall clock plus the grace, as an
    aware UTC datetime, for people (a new leader gives the hold its full
    grace again from its election). None if the member did not say."""

    name: str
    owner_key: str
    token: int
    grace: float
    deadline: Optional[datetime.datetime]

    @staticmethod
    def from_pushed(r: "pb.RevokeRequested") -> "Revocation":
        """The revocation a session is told of (a push, or a resume's list)."""
        return Revocation(name=r.name, owner_key=r.owner_key, token=r.token, grace=_seconds(r.grace),
                          deadline=_utc(r.deadline) if r.HasField("deadline") else None)

    @staticmethod
    def from_holder(name: str, h: "pb.Holder") -> "Revocation":
        """The revocation of a hold as a Revoke's answer lists it."""
        return Revocation(name=name, owner_key=h.owner_key, token=h.token, grace=_seconds(h.revoke_grace),
                          deadline=_utc(h.revoke_deadline) if h.HasField("revoke_deadline") else None)


def grace_nanos(grace: Grace) -> int:
    """grace (seconds, or a timedelta) in nanoseconds, if it can be a
    revocation's grace: rules.MIN_REVOKE_GRACE .. rules.MAX_REVOKE_GRACE
    in whole milliseconds, as the members check it. InvalidArgument
    saying what is wrong otherwise."""
    if isinstance(grace, datetime.timedelta):
        # Exact: a timedelta is whole microseconds.
        ns = (grace.days * 86400 + grace.seconds) * 10**9 + grace.microseconds * 1000
        shown = f"{grace.total_seconds()}s"
    elif isinstance(grace, (int, float)) and not isinstance(grace, bool):
        if not math.isfinite(grace):
            raise InvalidArgument(f"revoke grace {grace}s is not a finite number of seconds")
        # Rounded to the nanosecond: 1.001 s is 1001 ms, not 1000.999... ms.
        ns = round(grace * 10**9)
        shown = f"{grace}s"
    else:
        raise InvalidArgument(f"revoke grace {grace!r} is not seconds or a timedelta")
    lo, hi = rules.MIN_REVOKE_GRACE, rules.MAX_REVOKE_GRACE
    if not lo * 10**9 <= ns <= hi * 10**9:
        raise InvalidArgument(f"revoke grace {shown} is outside 1s..1h ({lo:g}s..{hi:g}s)")
    if ns % 10**6:
        raise InvalidArgument(f"revoke grace {shown} is not a whole number of milliseconds")
    return ns


def revoke_lock(client: "Client", name: str, grace: Grace, token: Optional[int]) -> list[Revocation]:
    """Client.revoke_lock: validate, then POST /v1/locks/revoke."""
    rules.check_lock_name(name)
    ns = grace_nanos(grace)
    if token is None:
        token = 0
    if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < 2**64:
        raise InvalidArgument(f"revoke token {token!r} is not a fencing token: an int below 2**64 (None or 0: every holder)")
    d = Duration()
    d.FromNanoseconds(ns)
    req = pb.RevokeRequest(name=name, token=token, grace=d)
    resp = client._post("/v1/locks/revoke", req, pb.RevokeResponse())
    return [Revocation.from_holder(name, h) for h in resp.revoked]


def _seconds(d: Duration) -> float:
    return d.seconds + d.nanos / 1e9


def _utc(ts: Timestamp) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ts.seconds, datetime.timezone.utc) + datetime.timedelta(microseconds=ts.nanos // 1000)
