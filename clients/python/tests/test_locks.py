"""Locks against a real member: mutex, try-lock, FIFO, semaphore and
read/write rules."""

from __future__ import annotations

import threading

import pytest

import baton
from harness import wait_for


def test_lock_and_release_with_increasing_tokens(client: baton.Client, name: str) -> None:
    with client.session(ttl=10, owner="pytest/tokens") as s:
        tokens = []
        for _ in range(3):
            with s.lock(name, timeout=5) as lease:
                assert lease.valid() and not lease.lost.is_set()
                assert 0 < lease.remaining() <= 10
                assert client.check(name, lease.token)
                tokens.append(lease.token)
            assert lease.lost.is_set() and isinstance(lease.error, baton.Released)
            assert not client.check(name, lease.token)
        assert tokens == sorted(tokens) and len(set(tokens)) == 3
        assert client.get_lock(name) is None


def test_reentry_keeps_the_token(client: baton.Client, name: str) -> None:
    with client.session() as s:
        a = s.lock(name)
        b = s.lock(name)
        assert a.token == b.token
        st = client.get_lock(name)
        assert st is not None and st.holders[0].count == 2
        b.release()
        a.release()
        assert client.get_lock(name) is None


def test_try_lock_on_a_held_lock_names_the_holder(client: baton.Client, name: str) -> None:
    with client.session(owner="pytest/holder") as a, client.session(owner="pytest/other") as b:
        lease = a.try_lock(name)
        with pytest.raises(baton.LockBusy) as e:
            b.try_lock(name)
        assert e.value.holder is not None
        assert (e.value.holder.session_id, e.value.holder.token, e.value.holder.owner) == (a.id, lease.token, "pytest/holder")
        lease.release()
        b.try_lock(name).release()


def test_three_waiters_are_granted_in_fifo_order(client: baton.Client, name: str) -> None:
    holder = client.session(owner="pytest/first")
    waiters = [client.session(owner=f"pytest/w{i}") for i in range(3)]
    try:
        first = holder.lock(name)
        order: list[tuple[int, int]] = []
        errors: list[BaseException] = []

        def wait(i: int) -> None:
            try:
                with waiters[i].lock(name, timeout=30) as lease:
                    order.append((i, lease.token))
            except BaseException as e:  # reported below
                errors.append(e)

        threads = []
        for i in range(3):
            t = threading.Thread(target=wait, args=(i,))
            t.start()
            threads.append(t)
            # The next waiter starts only once this one is queued.
            wait_for(f"waiter {i} queued", lambda: len((client.get_lock(name) or baton.LockState(name, 1)).waiters) == i + 1)
        assert client.get_lock(name).waiters == [w.id for w in waiters]  # type: ignore[union-attr]
        first.release()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert [i for i, _ in order] == [0, 1, 2]
        tokens = [first.token] + [tok for _, tok in order]
        assert tokens == sorted(tokens) and len(set(tokens)) == 4
    finally:
        for s in [holder, *waiters]:
            s.close()


def test_lock_times_out_and_leaves_the_queue(client: baton.Client, name: str) -> None:
    with client.session() as a, client.session() as b:
        a.lock(name)
        with pytest.raises(baton.Timeout):
            b.lock(name, timeout=0.3)
        assert client.get_lock(name).waiters == []  # type: ignore[union-attr]


def test_semaphore_admits_its_permits(client: baton.Client, name: str) -> None:
    sessions = [client.session(owner=f"pytest/sem{i}") for i in range(3)]
    try:
        p0 = sessions[0].semaphore(name, 2).acquire()
        p1 = sessions[1].semaphore(name, 2).acquire(timeout=5)
        assert p0.token != p1.token
        with pytest.raises(baton.LockBusy):
            sessions[2].semaphore(name, 2).try_acquire()
        with pytest.raises(baton.LimitMismatch):
            sessions[2].semaphore(name, 3).try_acquire()
        got: list[baton.Lease] = []
        t = threading.Thread(target=lambda: got.append(sessions[2].semaphore(name, 2).acquire(timeout=30)))
        t.start()
        wait_for("the third queued", lambda: len(client.get_lock(name).waiters) == 1)  # type: ignore[union-attr]
        assert not got
        p0.release()
        t.join(30)
        assert got and got[0].token > p1.token
        st = client.get_lock(name)
        assert st is not None and st.limit == 2 and sorted(h.session_id for h in st.holders) == sorted([sessions[1].id, sessions[2].id])
    finally:
        for s in sessions:
            s.close()


def test_read_write_lock_rules(client: baton.Client, name: str) -> None:
    r1, r2, w, late = (client.session(owner=f"pytest/{n}") for n in ("r1", "r2", "w", "late"))
    try:
        a = r1.rwlock(name).read_lock()
        b = r2.rwlock(name).read_lock(timeout=5)
        with pytest.raises(baton.LockBusy):
            w.rwlock(name).try_write_lock()
        with pytest.raises(baton.LimitMismatch):
            r1.rwlock(name).try_write_lock()  # a reader cannot become the writer
        got: list[baton.Lease] = []
        t = threading.Thread(target=lambda: got.append(w.rwlock(name).write_lock(timeout=30)))
        t.start()
        wait_for("the writer queued", lambda: len(client.get_lock(name).waiters) == 1)  # type: ignore[union-attr]
        with pytest.raises(baton.LockBusy):
            late.rwlock(name).try_read_lock()  # a reader after a waiting writer waits
        a.release()
        assert not got
        b.release()
        t.join(30)
        assert got and got[0].token > max(a.token, b.token)
        with pytest.raises(baton.LockBusy):
            late.rwlock(name).try_read_lock()
        got[0].release()
        late.rwlock(name).try_read_lock().release()
    finally:
        for s in (r1, r2, w, late):
            s.close()


def test_closing_the_session_releases_and_ends_leases(client: baton.Client, name: str) -> None:
    s = client.session()
    lease = s.lock(name)
    s.close()
    assert lease.lost.is_set() and isinstance(lease.error, baton.SessionClosed)
    assert client.get_lock(name) is None
    with pytest.raises(baton.SessionClosed):
        s.lock(name)


def test_bad_input_fails_alone_before_sending(client: baton.Client) -> None:
    with client.session() as s:
        for bad in ("", "x" * 513, "a\x00b"):
            with pytest.raises(baton.InvalidArgument):
                s.lock(bad)
        with pytest.raises(baton.InvalidArgument):
            s.semaphore("pool", 0)
        assert s.state == "healthy"
    with pytest.raises(baton.InvalidArgument):
        client.session(ttl=0.5)
