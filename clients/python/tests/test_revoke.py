"""Cooperative revocation against real members: the holder is told at
once and lets go in time, or loses its lease with Revoked when the grace
passes; a revoke that names no hold, or says something wrong, changes
nothing; a holder whose stream was down learns it at its resume, even of
a hold whose grant's answer it had not heard yet.

Every wait is on an event (a lease's revoke_requested or lost, a
waiter's grant) with a bound far above what it needs; the only grace a
test lets pass is the minimum, 1 s, with sessions of a 10 s TTL or more,
so that no keepalive falls due in the middle of what is measured."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Optional

import pytest

import baton
from baton._pb import pb
from harness import Cluster, wait_for
from proxy import Proxy


class Waiter:
    """A session's lock() of name in a thread of its own, with when it
    was granted."""

    def __init__(self, s: baton.Session, name: str, timeout: float = 30) -> None:
        self.lease: Optional[baton.Lease] = None
        self.error: Optional[BaseException] = None
        self.at = 0.0
        self.done = threading.Event()

        def run() -> None:
            try:
                self.lease = s.lock(name, timeout=timeout)
                self.at = time.monotonic()
            except BaseException as e:  # reported by get()
                self.error = e
            self.done.set()

        self._t = threading.Thread(target=run, daemon=True)
        self._t.start()

    def get(self, timeout: float = 30) -> baton.Lease:
        assert self.done.wait(timeout), "the waiter was never answered"
        if self.error is not None:
            raise self.error
        assert self.lease is not None
        return self.lease


def queued(client: baton.Client, name: str, sid: int) -> bool:
    st = client.get_lock(name)
    return st is not None and sid in st.waiters


def holder_on_member(client: baton.Client, name: str) -> "pb.Holder":
    """The lock's first holder as the member shows it, with its revoke
    fields (baton.Holder leaves them out)."""
    out = client._get("/v1/lock", {"name": name}, pb.GetResponse())
    assert out.HasField("lock") and out.lock.holders, f"{name} is not held"
    return out.lock.holders[0]


def test_a_holder_told_of_a_revoke_releases_in_time(client: baton.Client, name: str) -> None:
    """The holder is told at once, with what the revoke answered; its
    lease stays valid; asked again, the first revocation stands; its
    release hands the lock to the waiter with a larger token."""
    with client.session(ttl=10, owner="pytest/revoked") as a, client.session(ttl=10, owner="pytest/next") as b:
        lease = a.lock(name, timeout=10)
        assert not lease.revoke_requested.is_set() and lease.revocation is None
        nxt = Waiter(b, name)
        wait_for("the waiter queued", lambda: queued(client, name, b.id))
        revs = client.revoke_lock(name, grace=30)
        assert len(revs) == 1
        r = revs[0]
        assert (r.name, r.owner_key, r.token, r.grace) == (name, "", lease.token, 30.0)
        assert lease.revoke_requested.wait(10), "the holder was never told of the revoke"
        assert lease.revocation == r
        assert not lease.lost.is_set() and lease.valid() and lease.error is None
        # The deadline is the member's wall clock (it may run elsewhere,
        # BATON_ENDPOINTS): what Get shows, to the microsecond.
        h = holder_on_member(client, name)
        assert h.token == lease.token and h.revoke_grace.ToNanoseconds() == 30 * 10**9
        assert r.deadline == h.revoke_deadline.ToDatetime(tzinfo=datetime.timezone.utc)
        # Asked again, with another grace: the first revocation stands.
        assert client.revoke_lock(name, grace=5) == revs
        assert lease.revocation == r
        assert not nxt.done.is_set()
        lease.release()
        got = nxt.get()
        assert got.token > lease.token and not got.revoke_requested.is_set() and got.revocation is None
        assert isinstance(lease.error, baton.Released)
        assert client.check(name, got.token) and not client.check(name, lease.token)
        got.release()


def test_a_holder_that_ignores_it_loses_the_lease_at_the_grace(client: baton.Client, name: str) -> None:
    """A holder that does not let go is ended by the leader when the
    grace (the minimum, 1 s) passes: its lease is lost with Revoked (a
    NotHeld) naming the revocation, its token no longer checks, and the
    waiter gets the lock with a larger token."""
    with client.session(ttl=10, owner="pytest/stubborn") as a, client.session(ttl=10, owner="pytest/next") as b:
        lease = a.lock(name, timeout=10)
        nxt = Waiter(b, name)
        wait_for("the waiter queued", lambda: queued(client, name, b.id))
        asked = time.monotonic()
        (r,) = client.revoke_lock(name, grace=1)
        assert lease.revoke_requested.wait(10)
        assert lease.lost.wait(20), "the lease outlived the revoke's grace"
        lost_at = time.monotonic()
        err = lease.error
        assert isinstance(err, baton.Revoked) and isinstance(err, baton.NotHeld), repr(err)
        assert err.revocation == r and "grace" in str(err)
        # The leader counts the grace from the revoke's apply, after asked.
        assert lost_at - asked >= 0.9, lost_at - asked
        got = nxt.get()
        assert got.token > lease.token
        assert not client.check(name, lease.token) and client.check(name, got.token)
        assert not lease.valid() and a.state == "healthy"
        with pytest.raises(baton.NotHeld):
            lease.release()
        got.release()


def test_a_conditional_revoke_with_a_wrong_token_changes_nothing(client: baton.Client, name: str) -> None:
    """A revoke naming a token the lock does not have is refused
    (TOKEN_MISMATCH) and asks nobody: the member shows no revoke, and the
    revoke with the right token that follows is the first, with its own
    grace, and the first the holder hears of."""
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        with pytest.raises(baton.NotHeld) as e:
            client.revoke_lock(name, grace=5, token=lease.token + 1)
        assert e.value.reason == "TOKEN_MISMATCH" and f"token {lease.token + 1}" in str(e.value)
        h = holder_on_member(client, name)
        assert not h.HasField("revoke_deadline") and not h.HasField("revoke_grace")
        (r,) = client.revoke_lock(name, grace=60, token=lease.token)
        assert r.token == lease.token and r.grace == 60.0
        assert lease.revoke_requested.wait(10)
        assert lease.revocation == r
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
        assert not lease.revoke_requested.is_set()
        lease.release()


def test_grace_in_whole_milliseconds_and_timedelta_are_sent_as_they_are(client: baton.Client, name: str) -> None:
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        (r,) = client.revoke_lock(name, grace=datetime.timedelta(minutes=1, milliseconds=1))
        assert r.grace == 60.001
        assert lease.revoke_requested.wait(10) and lease.revocation == r
        lease.release()
    with client.session(ttl=10) as a:
        lease = a.lock(name, timeout=10)
        (r,) = client.revoke_lock(name, grace=1.001)  # 1.001 * 1e9 is 1000999999.9999999
        assert r.grace == 1.001
        lease.release()


def test_a_holder_reconnecting_when_revoked_learns_it_at_the_resume(node: Cluster, name: str) -> None:
    """The revoke is pushed while the holder's stream is down, to nobody;
    the resume's list of holds says the hold is being revoked."""
    p = Proxy(node.endpoints)
    direct = baton.connect(node.endpoints)
    try:
        with baton.connect(p.addr).session(ttl=30) as s:
            lease = s.lock(name, timeout=10)
            p.refuse = True  # the session cannot resume until let through
            p.cut()
            (r,) = direct.revoke_lock(name, grace=60)
            assert not lease.revoke_requested.is_set()
            p.refuse = False
            assert lease.revoke_requested.wait(20), "the resume did not tell the holder of the revoke"
            assert lease.revocation == r and lease.error is None
            lease.release()
    finally:
        direct.close()
        p.close()


def test_a_revoke_of_a_grant_whose_answer_was_lost(node: Cluster, name: str) -> None:
    """A waiter whose stream is down when it is granted the lock, and when
    that hold is revoked, learns both at its resume: the list of holds
    (with the revoke) comes before the retried wait's answer, and the
    lease that answer makes starts revoked. A reentrant lease of the
    revoked hold is revoked too."""
    p = Proxy(node.endpoints)
    direct = baton.connect(node.endpoints)
    try:
        with direct.session(ttl=30, owner="pytest/first") as holder, \
                baton.connect(p.addr).session(ttl=30, owner="pytest/waiter") as waiter:
            first = holder.lock(name, timeout=10)
            w = Waiter(waiter, name)
            wait_for("the waiter queued", lambda: queued(direct, name, waiter.id))
            p.refuse = True  # the waiter's stream is down: the grant and the revoke go to nobody
            p.cut()
            first.release()
            st = wait_for("the waiter granted", lambda: direct.get_lock(name))
            assert st.holders[0].session_id == waiter.id
            (r,) = direct.revoke_lock(name, grace=60)
            assert r.token > first.token
            assert not w.done.is_set()
            p.refuse = False  # the resume, then the wait sent again with its seq
            lease = w.get()
            assert lease.token == r.token
            assert lease.revoke_requested.is_set(), "the lease of a hold revoked before its grant's answer does not know it"
            assert lease.revocation == r and lease.error is None
            again = waiter.lock(name, timeout=10)
            assert again.token == lease.token
            assert again.revoke_requested.is_set() and again.revocation == r
            again.release()
            lease.release()
    finally:
        direct.close()
        p.close()


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
        assert lease.revoke_requested.wait(10) and lease.revocation == r
        lease.release()
