"""The lease table's part in revocation, without a member: which leases a
revoke reaches, what it leaves alone, and the bounded memory of revokes
of holds whose grant's answer is still to come (test_revoke.py has the
same cases against a real member where a member can stage them)."""

from __future__ import annotations

import threading

import baton
from baton.leases import MAX_REVOKED_EARLY, Lease, LeaseTable
from baton.revoke import Revocation


class FakeSession:
    """What a Lease asks of its session here: the lock its fields are
    guarded by."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self.id = 1


def lease(name: str, token: int, key: str = "") -> Lease:
    return Lease(FakeSession(), name, key, token)  # type: ignore[arg-type]


def rev(name: str, token: int, grace: float = 30.0, key: str = "") -> Revocation:
    return Revocation(name=name, owner_key=key, token=token, grace=grace, deadline=None)


def test_a_revoke_tells_every_lease_of_its_hold_and_no_other() -> None:
    t = LeaseTable()
    a, b, other, other_key = lease("x", 5), lease("x", 5), lease("y", 5), lease("x", 5, key="k")
    for l in (a, b, other, other_key):
        t.add(l)
    r = rev("x", 5)
    t.revoke_requested(r)
    assert a.revoke_requested.is_set() and b.revoke_requested.is_set()
    assert a.revocation is r and b.revocation is r
    assert not other.revoke_requested.is_set() and not other_key.revoke_requested.is_set()
    assert not t.revoked_early


def test_a_revoke_of_an_older_hold_changes_nothing() -> None:
    t = LeaseTable()
    a = lease("x", 9)
    t.add(a)
    t.revoke_requested(rev("x", 7))
    assert not a.revoke_requested.is_set() and a.revocation is None
    assert not t.revoked_early


def test_a_second_revoke_of_a_hold_changes_nothing() -> None:
    t = LeaseTable()
    a = lease("x", 5)
    t.add(a)
    first = rev("x", 5, grace=60)
    t.revoke_requested(first)
    t.revoke_requested(rev("x", 5, grace=1))
    assert a.revocation is first


def test_a_reentrant_lease_of_a_revoked_hold_starts_revoked() -> None:
    t = LeaseTable()
    a = lease("x", 5)
    t.add(a)
    r = rev("x", 5)
    t.revoke_requested(r)
    b = lease("x", 5)
    t.add(b)
    assert b.revoke_requested.is_set() and b.revocation is r


def test_a_revoke_before_its_grants_answer_is_kept_for_the_lease() -> None:
    t = LeaseTable()
    r = rev("x", 8)
    t.revoke_requested(r)  # no lease of the hold yet
    assert t.revoked_early == {("x", ""): r}
    a = lease("x", 8)
    t.add(a)
    assert a.revoke_requested.is_set() and a.revocation is r
    assert not t.revoked_early


def test_a_revoke_before_a_newer_holds_answer_is_kept_too() -> None:
    """The session holds token 5; a revoke of its later hold 8 (the grant
    of a retried acquire not answered yet) waits for that lease, and the
    lease of 5 is not told."""
    t = LeaseTable()
    old = lease("x", 5)
    t.add(old)
    r = rev("x", 8)
    t.revoke_requested(r)
    assert not old.revoke_requested.is_set()
    new = lease("x", 8)
    t.add(new)
    assert new.revocation is r and isinstance(old.error, baton.NotHeld)


def test_a_kept_revoke_does_not_reach_a_lease_of_another_token() -> None:
    t = LeaseTable()
    t.revoke_requested(rev("x", 8))
    a = lease("x", 6)  # an older hold's answer: the revoke was of a later hold
    t.add(a)
    assert not a.revoke_requested.is_set() and not t.revoked_early
    t.revoke_requested(rev("y", 3))
    b = lease("y", 4)  # a later hold than the revoked one: it is not
    t.add(b)
    assert not b.revoke_requested.is_set()


def test_kept_revokes_are_bounded_oldest_first() -> None:
    t = LeaseTable()
    for i in range(MAX_REVOKED_EARLY):
        t.revoke_requested(rev(f"l{i}", 10))
    t.revoke_requested(rev("l0", 11))  # a newer revoke of a kept hold replaces it in place
    assert len(t.revoked_early) == MAX_REVOKED_EARLY and t.revoked_early[("l0", "")].token == 11
    t.revoke_requested(rev("new", 10))
    assert len(t.revoked_early) == MAX_REVOKED_EARLY == 1024
    assert ("l0", "") not in t.revoked_early and ("l1", "") in t.revoked_early and ("new", "") in t.revoked_early


def test_the_loss_of_a_revoked_hold_names_the_revocation() -> None:
    t = LeaseTable()
    a, b = lease("x", 5), lease("y", 6)
    t.add(a)
    t.add(b)
    r = rev("x", 5, grace=1)
    t.revoke_requested(r)
    t.hold_lost("x", "", 5)
    t.hold_lost("y", "", 6)
    assert isinstance(a.error, baton.Revoked) and isinstance(a.error, baton.NotHeld) and a.error.revocation is r
    assert isinstance(b.error, baton.NotHeld) and not isinstance(b.error, baton.Revoked)


def test_a_resumes_list_tells_of_revokes() -> None:
    t = LeaseTable()
    a = lease("x", 5)
    t.add(a)
    r = rev("x", 5)
    t.server_holds_part([("x", "", 5)], [r], index=10, done=False)
    assert a.revocation is r
    t.server_holds_part([], [], index=10, done=True)
    assert a.error is None
