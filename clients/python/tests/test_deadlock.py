"""Deadlocks against a real member: a wait that would close a cycle is
refused at once, and a wait that a grant leaves deadlocked is ended by the
member's WaitEnded push; either way baton.Deadlock names the cycle, the
refused or ended wait first. Every wait is bounded by WAIT: a deadlock the
member failed to see would end as baton.Timeout instead, and fail."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pytest

import baton
from baton._pb import pb
from harness import wait_for

WAIT = 20.0


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    p = ThreadPoolExecutor(max_workers=4)
    try:
        yield p
    finally:
        p.shutdown(wait=True, cancel_futures=True)


def waiting(client: baton.Client, name: str) -> list[int]:
    st = client.get_lock(name)
    return [] if st is None else st.waiters


def edge(session: int, owner_key: str, lock: str, blocker: int, blocker_key: str) -> "pb.DeadlockEdge":
    return pb.DeadlockEdge(session_id=session, owner_key=owner_key, lock=lock,
                           blocker_session_id=blocker, blocker_owner_key=blocker_key)


def test_a_wait_that_would_close_a_cycle_is_refused_with_the_cycle(client: baton.Client, name: str,
                                                                   pool: ThreadPoolExecutor) -> None:
    """a holds x, b holds y, a waits for y: b's wait for x would close the
    cycle, so the member refuses it at once, naming both waits, and queues
    nothing. a's wait goes on, and is granted y when b lets go."""
    x, y = f"{name}/x", f"{name}/y"
    with client.session(owner="pytest/a") as a, client.session(owner="pytest/b") as b:
        a.lock(x, timeout=WAIT)
        by = b.lock(y, timeout=WAIT)
        ay = pool.submit(a.lock, y, WAIT)
        wait_for("a to queue for y", lambda: waiting(client, y) == [a.id], timeout=WAIT)

        with pytest.raises(baton.Deadlock) as e:
            b.lock(x, timeout=WAIT)
        assert e.value.reason == "DEADLOCK"
        assert e.value.cycle == [edge(b.id, "", x, a.id, ""), edge(a.id, "", y, b.id, "")]
        msg = str(e.value)
        assert "\n" not in msg and f'waits for lock "{x}" held by session {a.id}' in msg, msg
        assert waiting(client, x) == [], "the refused wait queued nothing"

        assert not ay.done(), "a's wait for y goes on"
        assert waiting(client, y) == [a.id]
        by.release()
        got = ay.result(WAIT)
        assert got.token > by.token and client.get_lock(y).holders[0].session_id == a.id  # type: ignore[union-attr]


def test_a_wait_a_grant_leaves_deadlocked_ends_with_the_cycle(client: baton.Client, name: str,
                                                             pool: ThreadPoolExecutor) -> None:
    """The Go client's TestDeadlockAtAGrant: z holds x, b holds y; a (key
    "k") waits for x and for y, then b waits for x behind a. When z lets go
    of x, a is granted x, and now a's wait for y (held by b, who waits for
    x, held by a) is a deadlock: the member ends it with a WaitEnded push
    naming the cycle. b is granted x when a lets go of it."""
    x, y = f"{name}/x", f"{name}/y"
    with client.session(owner="pytest/a") as a, client.session(owner="pytest/b") as b, \
            client.session(owner="pytest/z") as z:
        zx = z.lock(x, timeout=WAIT)
        b.lock(y, timeout=WAIT)
        ax = pool.submit(lambda: a.lock(x, WAIT, owner_key="k"))
        wait_for("a to queue for x", lambda: waiting(client, x) == [a.id], timeout=WAIT)
        ay = pool.submit(lambda: a.lock(y, WAIT, owner_key="k"))
        wait_for("a to queue for y", lambda: waiting(client, y) == [a.id], timeout=WAIT)
        bx = pool.submit(b.lock, x, WAIT)
        wait_for("b to queue for x", lambda: waiting(client, x) == [a.id, b.id], timeout=WAIT)

        zx.release()
        got = ax.result(WAIT)
        with pytest.raises(baton.Deadlock) as e:
            ay.result(WAIT)
        assert e.value.reason == "DEADLOCK"
        assert e.value.cycle == [edge(a.id, "k", y, b.id, ""), edge(b.id, "", x, a.id, "k")]
        msg = str(e.value)
        assert "\n" not in msg and f'session {a.id} key "k" waits for lock "{y}" held by session {b.id}' in msg, msg
        assert waiting(client, y) == [], "the ended wait left the queue"

        assert not bx.done(), "b waits while a holds x"
        got.release()
        b_got = bx.result(WAIT)
        assert b_got.token > got.token
        assert [h.session_id for h in client.get_lock(x).holders] == [b.id]  # type: ignore[union-attr]
