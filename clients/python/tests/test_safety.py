"""The guarantees that make a lock safe: exactly-once retries, a leader
change with the lease kept, and loss declared before the server can hand
the lock on. These start their own members (and a proxy in front of one),
since they kill members and break the network."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

import baton
from baton._framing import Stream
from baton._pb import pb
from harness import Cluster, baton_bin, wait_for
from proxy import Proxy


def raw_session(addr: str) -> tuple[Stream, int]:
    """A stream with a session opened on it by hand. A new cluster answers
    its first opens NOT_LEADER (naming itself) until it raised its log
    version: the open is sent again, as a library would."""
    def attempt() -> "tuple[Stream, int] | None":
        st = Stream.dial(addr, 5, None, None)
        st.set_timeout(10)
        st.send(pb.SessionsRequest(requests=[pb.ChannelRequest(channel=1, request=pb.SessionRequest(
            id=1, open=pb.OpenSessionRequest(owner="pytest/raw", nonce=7)))]))
        for cr in st.recv().responses:
            if cr.HasField("response") and cr.response.HasField("open"):
                return st, cr.response.open.session_id
        st.close()
        return None
    return wait_for("a session opened by hand", attempt, timeout=20, every=0.05)


def test_an_acquire_sent_twice_with_one_seq_is_granted_once(node: Cluster, name: str) -> None:
    """The protocol itself: an acquire sent again with its seq gets the
    first send's answer, and the hold is taken once."""
    addr = node.endpoints
    st, sid = raw_session(addr)
    try:
        def send(r: pb.SessionRequest) -> None:
            st.send(pb.SessionsRequest(requests=[pb.ChannelRequest(channel=1, request=r)]))

        def answer() -> pb.SessionResponse:
            while True:
                for cr in st.recv().responses:
                    assert not cr.HasField("end"), cr
                    if cr.HasField("response") and cr.response.id:
                        return cr.response

        acquire = pb.AcquireRequest(header=pb.RequestHeader(session_id=sid, seq=1), name=name)
        send(pb.SessionRequest(id=2, acquire=acquire))
        a = answer().acquire
        send(pb.SessionRequest(id=3, acquire=acquire))  # a retry, as after a lost answer
        b = answer().acquire
        assert a.acquired and b.acquired and a.token == b.token and a.count == b.count == 1
        with baton.connect(addr) as c:
            st_lock = c.get_lock(name)
            assert st_lock is not None and st_lock.holders[0].count == 1
    finally:
        st.close()


def test_a_lost_answer_is_retried_with_its_seq_and_granted_once(node: Cluster, name: str) -> None:
    """The library: the answer to an acquire is lost with its connection;
    the session resumes and sends the acquire again with its sequence
    number, and learns the grant the first send got instead of taking the
    lock a second time."""
    p = Proxy(node.endpoints)
    direct = baton.connect(node.endpoints)
    try:
        with baton.connect(p.addr).session(ttl=10) as s:
            p.drop_answers = True
            got: list[baton.Lease] = []
            t = threading.Thread(target=lambda: got.append(s.lock(name, timeout=20)))
            t.start()
            held = wait_for("the acquire applied", lambda: direct.get_lock(name))
            assert held.holders[0].session_id == s.id and not got
            p.drop_answers = False
            p.cut()  # the reconnect resends the acquire with its seq
            t.join(30)
            assert got and got[0].token == held.holders[0].token
            after = direct.get_lock(name)
            assert after is not None and after.holders[0].count == 1
            got[0].release()
            assert direct.get_lock(name) is None
    finally:
        direct.close()
        p.close()


def test_leader_change_keeps_the_lease() -> None:
    c = Cluster(3)
    try:
        cl = baton.connect(c.endpoints)
        with cl.session(ttl=10, owner="pytest/failover") as s:
            lease = s.lock("failover/job", timeout=10)
            old = c.leader()
            c.kill(old)
            new = c.leader(exclude=old)
            assert new != old
            # The session resumes on the new leader and keeps its hold.
            wait_for("the hold seen on the new leader", lambda: cl.check("failover/job", lease.token))
            wait_for("a keepalive answered by the new leader",
                     lambda: s.deadline() - time.monotonic() > 10 * 2 / 3 - 1)
            assert not lease.lost.is_set() and lease.valid() and s.state == "healthy"
            lease.release()
            with cl.session() as other:
                nxt = other.try_lock("failover/job")
                assert nxt.token > lease.token
    finally:
        c.stop()


def test_loss_is_declared_before_the_server_hands_the_lock_on(node: Cluster, name: str) -> None:
    """Session A reaches the member through a proxy that delays every
    answer by 0.8 s; session B waits for A's lock, directly. A's keepalives
    stop. The member ends A's session TTL after the last keepalive arrived
    and grants B. A client that counts its deadline from the send of that
    keepalive declares the lease lost TTL - margin after the send, before
    the grant; one that counted from the delayed answer would be 0.7 s
    late, after it. The test checks the order where B sees its grant."""
    p = Proxy(node.endpoints)
    ttl = 3.0
    margin = baton.safety_margin(ttl)
    try:
        a = baton.connect(p.addr).session(ttl=ttl, owner="pytest/paused")
        b = baton.connect(node.endpoints).session(ttl=10, owner="pytest/next")
        lease = a.lock(name, timeout=10)
        p.delay = 0.8
        slowed = time.monotonic()
        # A keepalive sent after the answers slowed down was answered: the
        # session is steady with every answer 0.8 s late.
        wait_for("a delayed keepalive answered", lambda: a.deadline() >= slowed + ttl - margin, timeout=10)
        seen: dict[str, object] = {}

        def next_holder() -> None:
            nxt = b.lock(name, timeout=30)
            seen["lost_before_grant"] = lease.lost.is_set()
            seen["token"] = nxt.token

        t = threading.Thread(target=next_holder)
        t.start()
        wait_for("B queued", lambda: b._client.get_lock(name).waiters == [b.id])  # type: ignore[union-attr]
        assert not lease.lost.is_set() and lease.valid()
        a._pause_keepalives()
        paused = time.monotonic()
        assert lease.lost.wait(ttl + 1), "the lease was never declared lost"
        lost_at = time.monotonic()
        # Counted from a send before the pause: TTL - margin at most.
        assert a.deadline() <= paused + ttl - margin
        assert lost_at - paused <= ttl
        assert isinstance(lease.error, baton.Jeopardy) and not lease.valid()
        t.join(30)
        assert seen.get("lost_before_grant") is True, seen
        assert int(seen["token"]) > lease.token  # type: ignore[call-overload]
        a.close(timeout=1)
        b.close()
    finally:
        p.close()


def test_the_secret_never_shows(node: Cluster) -> None:
    with baton.connect(node.endpoints).session() as s:
        secret = s._secret.reveal()
        assert len(secret) == 43
        lease = s.lock("secret/lock")
        shown = repr(s) + str(vars(s)) + repr(lease) + repr(s._client)
        assert secret not in shown and "<secret>" in shown
        # A stranger with the id but not the secret can do nothing for it.
        st = Stream.dial(node.endpoints, 5, None, None)
        st.set_timeout(10)
        try:
            st.send(pb.SessionsRequest(requests=[pb.ChannelRequest(channel=1, request=pb.SessionRequest(
                id=1, resume=pb.ResumeSession(session_id=s.id, secret="x" * 43)))]))
            ends = [cr.end for cr in st.recv().responses if cr.HasField("end")]
            assert ends and ends[0].error.reason == pb.SECRET_MISMATCH
            assert secret not in str(ends[0])
        finally:
            st.close()
        assert lease.valid()


def test_a_hold_ended_while_the_stream_was_down_is_lost_at_the_resume(node: Cluster, name: str) -> None:
    """An operator ends the session's hold while its stream cannot hear
    the push: the resume's answer lists the session's holds, and the lease
    of the hold missing from it is lost then, not at its release."""
    p = Proxy(node.endpoints)
    try:
        with baton.connect(p.addr).session(ttl=30) as s:
            lease = s.lock(name, timeout=10)
            other = s.lock(name + "/kept", timeout=10)
            p.drop_answers = True  # the hold_lost push is dropped
            subprocess.run([baton_bin(), "release", name, "--session", str(s.id), "--token", str(lease.token),
                            "--endpoints", node.endpoints], check=True, timeout=30, capture_output=True)
            assert not lease.lost.is_set()
            p.drop_answers = False
            p.cut()  # the session resumes; the member lists its holds
            assert lease.lost.wait(20), "the lease of the ended hold is not lost after the resume"
            assert not other.lost.is_set() and other.valid()
            other.release()
    finally:
        p.close()
