"""Revocation's operator side against real members: client.revoke_lock
asks the holds of a lock, and a revoke that names no hold, or says
something wrong, changes nothing and says what is wrong."""

from __future__ import annotations

import datetime
from typing import Iterator

import pytest

import baton
from baton._pb import pb
from harness import Cluster


@pytest.fixture
def node() -> Iterator[Cluster]:
    c = Cluster(1)
    try:
        yield c
    finally:
        c.stop()


def holder_on_member(client: baton.Client, name: str) -> "pb.Holder":
    """The lock's first holder as the member shows it, with its revoke
    fields (baton.Holder leaves them out)."""
    out = client._get("/v1/lock", {"name": name}, pb.GetResponse())
    assert out.HasField("lock") and out.lock.holders, f"{name} is not held"
    return out.lock.holders[0]


def test_a_conditional_revoke_with_a_wrong_token_changes_nothing(client: baton.Client, name: str) -> None:
    """A revoke naming a token the lock does not have is refused
    (TOKEN_MISMATCH) and asks nobody: the member shows no revoke, and the
    revoke with the right token that follows is the first, with its own
    grace."""
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        with pytest.raises(baton.NotHeld) as e:
            client.revoke_lock(name, grace=5, token=lease.token + 1)
        assert e.value.reason == "TOKEN_MISMATCH" and f"token {lease.token + 1}" in str(e.value)
        h = holder_on_member(client, name)
        assert not h.HasField("revoke_deadline") and not h.HasField("revoke_grace")
        (r,) = client.revoke_lock(name, grace=60, token=lease.token)
        assert r.token == lease.token and r.grace == 60.0
        lease.release()


def test_a_revoke_of_a_lock_nobody_holds_is_not_found(client: baton.Client, name: str) -> None:
    with pytest.raises(baton.NotHeld) as e:
        client.revoke_lock(name)
    assert e.value.reason == "LOCK_NOT_FOUND" and "not held" in str(e.value)


@pytest.mark.parametrize("kw,says", [
    ({"grace": 0.999}, "outside 1s..1h"),
    ({"grace": 0}, "outside 1s..1h"),
    ({"grace": -5}, "outside 1s..1h"),
    ({"grace": 3600.001}, "outside 1s..1h"),
    ({"grace": datetime.timedelta(hours=2)}, "outside 1s..1h"),
    ({"grace": 1.0005}, "not a whole number of milliseconds"),
    ({"grace": datetime.timedelta(seconds=1, microseconds=1)}, "not a whole number of milliseconds"),
    ({"grace": float("inf")}, "not a finite number of seconds"),
    ({"grace": "30s"}, "not seconds or a timedelta"),
    ({"grace": True}, "not seconds or a timedelta"),
    ({"token": -1}, "not a fencing token"),
    ({"token": 2**64}, "not a fencing token"),
    ({"token": "7"}, "not a fencing token"),
])
def test_bad_input_is_refused_before_sending(kw: dict, says: str) -> None:
    """Refused with what is wrong, by the library: the client's only
    endpoint listens to nobody, so an answer could not come from a member."""
    c = baton.connect("127.0.0.1:1", max_attempts=1)
    with pytest.raises(baton.InvalidArgument) as e:
        c.revoke_lock("jobs/x", **kw)
    assert says in str(e.value), str(e.value)


@pytest.mark.parametrize("bad,says", [("", "empty"), ("a\nb", "control character"), ("x" * 513, "513 bytes")],
                         ids=["empty", "control", "long"])
def test_a_bad_name_is_refused_before_sending(bad: str, says: str) -> None:
    c = baton.connect("127.0.0.1:1", max_attempts=1)
    with pytest.raises(baton.InvalidArgument) as e:
        c.revoke_lock(bad)
    assert says in str(e.value)


@pytest.mark.parametrize("nanos", [500 * 10**6, 7200 * 10**9, 10**9 + 1000, -10**9])
def test_what_the_library_does_not_check_the_member_does(client: baton.Client, name: str, nanos: int) -> None:
    """A grace sent as is, past the library's check: the member's refusal
    comes back as InvalidArgument naming the grace, and the holder is not
    asked."""
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        req = pb.RevokeRequest(name=name)
        req.grace.FromNanoseconds(nanos)
        with pytest.raises(baton.InvalidArgument) as e:
            client._post("/v1/locks/revoke", req, pb.RevokeResponse())
        assert "grace" in str(e.value) and e.value.reason == "INVALID_ARGUMENT"
        assert not holder_on_member(client, name).HasField("revoke_deadline")
        lease.release()


def test_grace_in_whole_milliseconds_and_timedelta_are_sent_as_they_are(client: baton.Client, name: str) -> None:
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        (r,) = client.revoke_lock(name, grace=datetime.timedelta(minutes=1, milliseconds=1))
        assert r.grace == 60.001
        lease.release()
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        (r,) = client.revoke_lock(name, grace=1.001)  # 1.001 * 1e9 is 1000999999.9999999
        assert r.grace == 1.001
        lease.release()


def test_revoke_needs_admin_over_the_name_with_auth_on(node: Cluster) -> None:
    """With authentication on, a user that may lock jobs/ but not
    administer it is refused (PermissionDenied) and its hold is left
    alone; root's revoke reaches it."""
    root_token = node.cli("user", "add", "root", "--token")
    node.cli("user", "grant", "root", "root")
    node.cli("role", "add", "jobs")
    node.cli("role", "grant", "jobs", "jobs/", "lock,read")
    alice_token = node.cli("user", "add", "alice", "--token")
    node.cli("user", "grant", "alice", "jobs")
    node.cli("auth", "enable", token=root_token)
    alice = baton.connect(node.endpoints, token=alice_token)
    root = baton.connect(node.endpoints, token=root_token)
    with alice.session(ttl=10) as s:
        lease = s.lock("jobs/z", timeout=10)
        with pytest.raises(baton.PermissionDenied) as e:
            alice.revoke_lock("jobs/z")
        assert e.value.reason == "NOT_PERMITTED" and "admin" in str(e.value)
        with pytest.raises(baton.Unauthenticated):
            baton.connect(node.endpoints).revoke_lock("jobs/z")
        assert not holder_on_member(root, "jobs/z").HasField("revoke_deadline")
        (r,) = root.revoke_lock("jobs/z", grace=60)
        lease.release()
