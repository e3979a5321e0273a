"""The one table from the members' Reasons to exceptions, and the end
frame's status decoded by hand."""

from __future__ import annotations

import pytest

import baton
from baton._framing import append_varint, parse_status
from baton._pb import pb
from baton.errors import from_wire, make_error


@pytest.mark.parametrize("reason,cls", [
    ("NOT_HOLDER", baton.NotHeld), ("TOKEN_MISMATCH", baton.NotHeld), ("LOCK_NOT_FOUND", baton.NotHeld),
    ("SESSION_EXPIRED", baton.SessionLost), ("SESSION_NOT_FOUND", baton.SessionLost),
    ("BLACKLISTED", baton.Blacklisted), ("SECRET_MISMATCH", baton.PermissionDenied),
    ("NOT_PERMITTED", baton.PermissionDenied), ("NO_CREDENTIALS", baton.Unauthenticated),
    ("INVALID_ARGUMENT", baton.InvalidArgument), ("WAIT_TIMED_OUT", baton.Timeout),
    ("WAIT_CANCELLED", baton.Cancelled), ("LIMIT_MISMATCH", baton.LimitMismatch),
    ("STALE_SEQUENCE", baton.FailedPrecondition), ("NOT_WAITING", baton.FailedPrecondition),
    ("TOO_MANY_WAITERS", baton.ResourceExhausted), ("OVERLOADED", baton.ResourceExhausted),
    ("NO_SPACE", baton.ResourceExhausted), ("NOT_LEADER", baton.Unavailable),
    ("OUTCOME_UNKNOWN", baton.Unavailable), ("DEADLOCK", baton.Deadlock),
])
def test_reasons_map_to_one_class_each(reason: str, cls: type) -> None:
    e = make_error(9, pb.Reason.Value(reason), "m", "10.0.0.1:7700")
    assert type(e) is cls and isinstance(e, baton.Error) and e.reason == reason


def test_every_reason_has_a_class() -> None:
    for name, v in pb.Reason.items():
        if v:
            assert type(make_error(2, v, "m")) is not baton.Error, name


def test_deadlock_carries_its_cycle() -> None:
    w = pb.Error(code=10, reason=pb.Reason.Value("DEADLOCK"), message="deadlock: session 2 waits for lock 'x' held by session 1",
                 deadlock_cycle=[pb.DeadlockEdge(session_id=2, lock="x", blocker_session_id=1),
                                 pb.DeadlockEdge(session_id=1, lock="y", blocker_session_id=2)])
    e = from_wire(w)
    assert type(e) is baton.Deadlock and [c.lock for c in e.cycle] == ["x", "y"]
    assert "\n" not in str(e) and "waits for lock" in str(e)


def test_codes_without_a_reason() -> None:
    assert type(make_error(14, 0, "down")) is baton.Unavailable
    assert type(make_error(13, 0, "internal")) is baton.Error
    assert type(make_error(9, 0, "precondition")) is baton.FailedPrecondition


def _field(b: bytearray, num: int, payload: bytes) -> None:
    b.append(num << 3 | 2)
    append_varint(b, len(payload))
    b += payload


def test_end_frame_status_with_leader() -> None:
    meta = bytearray()
    _field(meta, 1, b"leader_addr")
    _field(meta, 2, b"127.0.0.1:7710")
    info = bytearray()
    _field(info, 1, b"NOT_LEADER")
    _field(info, 2, b"batonlock.io")
    _field(info, 3, bytes(meta))
    anyb = bytearray()
    _field(anyb, 1, b"type.googleapis.com/google.rpc.ErrorInfo")
    _field(anyb, 2, bytes(info))
    st = bytearray([0x08, 14])
    _field(st, 2, b"not the leader")
    _field(st, 3, bytes(anyb))
    e = parse_status(bytes(st))
    assert isinstance(e, baton.Unavailable) and e.reason == "NOT_LEADER" and e.leader_addr == "127.0.0.1:7710"
    assert parse_status(b"") is None
