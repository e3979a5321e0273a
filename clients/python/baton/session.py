"""A session: the liveness every hold and wait of it rides on, its stream
to the leader, and its requests (docs/PROTOCOL.md, sections 4-8).

One connection to the leader carries the session's keepalives (every
TTL/3, keepalive.py), its requests, and what the leader pushes. Every
request that changes something has a sequence number it keeps however
often it is sent: when the stream breaks, the session follows the leader,
resumes, and sends every unanswered request again with its number, so
each takes effect exactly once.
"""

from __future__ import annotations

import base64
import logging
import random
import secrets
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from google.protobuf.duration_pb2 import Duration

from baton import keepalive, rules
from baton._framing import Stream, StreamEnded
from baton._pb import pb
from baton.errors import (Error, Holder, LockBusy, SessionClosed, SessionLost, Timeout, Unavailable,
                          describe_cycle, from_wire, is_retryable, is_session_gone, UNAVAILABLE)
from baton.leases import Lease, LeaseTable, end_lease, released_error
from baton.revoke import Revocation

if TYPE_CHECKING:
    from baton.client import Client

log = logging.getLogger("baton")

CHANNEL = 1  # each session has a connection of its own, with one channel on it

# CLEANUP_TIMEOUT bounds how long a lock() that gave up waits for its wait
# to leave the server's queue (and a grant that won the race to be
# released); the session goes on trying in the background after that.
CLEANUP_TIMEOUT = 5.0

# TIMEOUT_SLACK is how long past its timeout a waiting acquire waits for the
# member's WAIT_TIMED_OUT before giving up on its own: the answer may be
# delayed by a reconnect, and the member's answer is the one that says
# whether the wait ended unserved.
TIMEOUT_SLACK = 5.0

_HEADERED = ("acquire", "release", "cancel", "acquire_many")


class _Secret:
    """A session's secret, which never shows in a repr, str or traceback."""

    __slots__ = ("_v",)

    def __init__(self, v: str) -> None:
        self._v = v

    def reveal(self) -> str:
        return self._v

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class _Call:
    """One request of the session."""

    __slots__ = ("id", "seq", "req", "keepalive", "sent", "wait", "name", "owner_key",
                 "final", "resp", "err", "done", "abandoned", "cleanup", "retries")

    def __init__(self, req: "pb.SessionRequest", seq: int, keepalive: bool) -> None:
        self.id = 0
        self.seq = seq
        self.req = req
        self.keepalive = keepalive
        self.sent = 0.0
        self.wait = False
        self.name = ""
        self.owner_key = ""
        self.final = False
        self.resp: Optional[pb.SessionResponse] = None
        self.err: Optional[Error] = None
        self.done = threading.Event()
        self.abandoned = False
        self.cleanup: Optional[_Call] = None
        self.retries = 0


class Session:
    """A client session. Open one with Client.session(); use it as a
    context manager to close it on exit. Safe for use from many threads.

    A lock can be lost at any time: a partition, a pause or an operator's
    blacklist ends the session. Work under a lock should check its Lease
    and write through fencing tokens."""

    def __init__(self, client: "Client", ttl: float, owner: str) -> None:
        rules.check_ttl(ttl)
        rules.check_owner(owner, "owner")
        self._client = client
        self.id = 0
        self.ttl = ttl
        self.owner = owner
        self._secret = _Secret(base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode())
        self._mu = threading.Lock()
        self._cond = threading.Condition(self._mu)
        # Guarded by _mu:
        self._state = "healthy"  # healthy, jeopardy, expired, closed
        self._err: Optional[Error] = None
        self._ka = keepalive.KeepAlive(ttl)
        self._stream: Optional[Stream] = None
        self._last_seq = 0
        self._last_id = 0
        self._by_id: dict[int, _Call] = {}
        self._by_seq: dict[int, _Call] = {}
        self._closing: Optional[_Call] = None
        self._leases = LeaseTable()
        self.done = threading.Event()  # set when the session ended
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------

    def _open(self) -> None:
        """Open the session on the leader (the nonce and our own secret
        make a retried open find the session an earlier attempt made)."""
        req = pb.SessionRequest(id=1, open=pb.OpenSessionRequest(
            ttl=_duration(self.ttl), owner=self.owner,
            nonce=random.getrandbits(64) | 1, secret=self._secret.reveal()))
        # The deadline counts from before the first attempt: the answer may
        # be a retry's, naming a session whose TTL began earlier.
        sent = time.monotonic()
        stream, resp, _ = self._connect(req, bounded=True)
        with self._mu:
            self.id = resp.session_id
            self._last_id = 1
            self._stream = stream
            keepalive.extend_locked(self, sent, _seconds(resp.ttl) or self.ttl)
        self._threads = [
            threading.Thread(target=self._stream_loop, args=(stream,), name=f"baton-stream-{self.id}", daemon=True),
            threading.Thread(target=keepalive.keepalive_loop, args=(self,), name=f"baton-keepalive-{self.id}", daemon=True),
        ]
        for t in self._threads:
            t.start()

    @property
    def state(self) -> str:
        """healthy, jeopardy (the deadline passed unanswered: every lease
        is lost, the session may still come back), expired or closed."""
        with self._mu:
            return self._state

    @property
    def error(self) -> Optional[Error]:
        """None while the session lives; then SessionLost or SessionClosed."""
        with self._mu:
            return self._err

    def deadline(self) -> float:
        """The client's conservative deadline, a time.monotonic() reading:
        the session, and every lease of it, is valid until then."""
        with self._mu:
            return self._ka.deadline

    def close(self, timeout: float = 5.0) -> None:
        """End the session on the server, which releases its holds and drops
        its waits at once, and stop its threads. If timeout passes first the
        threads stop anyway and the server ends the session after its TTL.
        Closing an ended session does nothing."""
        with self._mu:
            c = None
            if not self._ended_locked():
                if self._closing is None:
                    self._closing = self._start_locked(pb.SessionRequest(close=pb.CloseSessionRequest()), True)
                c = self._closing
        if c is not None:
            c.done.wait(timeout)
        self._shutdown(SessionClosed("session closed"), "closed")
        self._join()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<baton.Session id={self.id} owner={self.owner!r} ttl={self.ttl} state={self._state}>"

    def _join(self) -> None:
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join()
        self._client._forget(self)

    def _shutdown(self, err: Error, state: str) -> None:
        with self._mu:
            self._end_locked(err, state)

    def _ended_locked(self) -> bool:
        return self._state in ("expired", "closed")

    def _end_locked(self, err: Error, state: str) -> None:
        """End the session: every lease is lost, every call fails with
        err, the threads stop."""
        if self._ended_locked():
            return
        self._err = err
        self._leases.end_all(err)
        self._leases.holds.clear()
        for c in list(self._by_seq.values()) + list(self._by_id.values()):
            self._finish_locked(c, None, err)
        if self._closing is not None:
            self._finish_locked(self._closing, None, err)
        self._state = state
        self.done.set()
        if self._stream is not None:
            self._stream.close()
        self._cond.notify_all()
        log.info("baton session %d ended (%s): %s", self.id, state, err)

    def _lost_locked(self, cause: Error) -> None:
        """The server no longer has the session (or refuses it); during a
        close that is a clean close."""
        if self._closing is not None:
            self._finish_locked(self._closing, None, None)
            self._end_locked(SessionClosed("session closed"), "closed")
            return
        if not isinstance(cause, SessionLost):
            cause = SessionLost(f"session lost: {cause}", code=cause.code, reason=cause.reason)
        self._end_locked(cause, "expired")

    # -- locks -------------------------------------------------------------

    def _acquire(self, name: str, owner_key: str, wait: bool, timeout: Optional[float],
                 shared: bool, limit: int) -> Lease:
        rules.check_lock_name(name)
        rules.check_owner(owner_key, "owner key")
        a = pb.AcquireRequest(name=name, owner_key=owner_key, wait=wait, shared=shared, limit=limit)
        if timeout is not None:
            rules.check_wait_timeout(timeout)
            a.wait_timeout.CopyFrom(_duration(timeout))

        def setup(c: _Call) -> None:
            c.wait, c.name, c.owner_key = wait, name, owner_key

        local = None if timeout is None else timeout + TIMEOUT_SLACK
        c = self._do(pb.SessionRequest(acquire=a), setup, local)
        ans = c.resp.acquire  # type: ignore[union-attr]
        if not ans.acquired:
            raise LockBusy(name, Holder.from_pb(ans.holder) if ans.HasField("holder") else None)
        return self._new_lease(name, owner_key, ans.token)

    def _new_lease(self, name: str, owner_key: str, token: int) -> Lease:
        """Register a lease of a granted hold. A grant that comes in
        jeopardy waits until the session is safe again, or ends."""
        with self._cond:
            while self._state == "jeopardy":
                self._cond.wait()
            if self._ended_locked():
                raise self._err  # type: ignore[misc]
            lease = Lease(self, name, owner_key, token)
            self._leases.add(lease)
            return lease

    def _release(self, lease: Lease, timeout: Optional[float]) -> None:
        with self._mu:
            if lease._released:
                return
            lease._released = True
            if self._ended_locked():
                return
            self._leases.remove(lease)
            end_lease(lease, released_error())
            c = self._start_locked(_release_request(lease.name, lease.owner_key, lease.token), True)
        if not c.done.wait(timeout):
            raise Timeout(f"release of {lease.name!r} unanswered after {timeout}s; the session goes on trying")
        if c.err is not None and not isinstance(c.err, (SessionClosed, SessionLost)):
            raise c.err

    # -- requests ----------------------------------------------------------

    def _new_call(self, req: "pb.SessionRequest", *, keepalive: bool = False, mutating: bool = False) -> _Call:
        seq = 0
        if mutating:
            self._last_seq += 1
            seq = self._last_seq
        c = _Call(req, seq, keepalive)
        if seq:
            self._by_seq[seq] = c
        return c

    def _do(self, req: "pb.SessionRequest", setup: Optional[Callable[[_Call], None]],
            timeout: Optional[float]) -> _Call:
        """Start a mutating request and wait for its final answer. If
        timeout passes first the request is abandoned (a wait is cancelled
        on the server, a grant that won the race released) and Timeout is
        raised."""
        with self._mu:
            c = self._new_call(req, mutating=True) if not self._ended_locked() else None
            if c is None:
                raise self._err  # type: ignore[misc]
            if setup is not None:
                setup(c)
            self._send_locked(c)
        if not c.done.wait(timeout):
            self._abandon(c)
            raise Timeout(f"no answer within {timeout}s")
        if c.err is not None:
            raise c.err
        return c

    def _start_locked(self, req: "pb.SessionRequest", mutating: bool) -> _Call:
        if self._ended_locked():
            raise self._err  # type: ignore[misc]
        c = self._new_call(req, mutating=mutating)
        self._send_locked(c)
        return c

    def _send_locked(self, c: _Call) -> None:
        """Queue c on the current stream with a fresh id and header; with
        no stream the reconnect sends it."""
        if self._stream is None or c.final:
            return
        self._last_id += 1
        c.id = self._last_id
        self._by_id[c.id] = c
        r = pb.SessionRequest()
        r.CopyFrom(c.req)
        r.id = c.id
        if c.seq:
            kind = r.WhichOneof("kind")
            if kind in _HEADERED:
                h = getattr(r, kind).header
                h.session_id, h.seq, h.min_unacked_seq = self.id, c.seq, self._min_unacked_locked()
            elif kind == "close":
                r.close.session_id, r.close.seq = self.id, c.seq
        self._stream.send(pb.SessionsRequest(requests=[pb.ChannelRequest(channel=CHANNEL, request=r)]))

    def _min_unacked_locked(self) -> int:
        """The lowest sequence number without a final answer (a queued
        acquire counts until granted or ended)."""
        return min(self._by_seq, default=self._last_seq + 1)

    def _finish_locked(self, c: _Call, resp: Optional["pb.SessionResponse"], err: Optional[Error]) -> None:
        if c.final:
            return
        c.final, c.resp, c.err = True, resp, err
        if c.seq and self._by_seq.get(c.seq) is c:
            del self._by_seq[c.seq]
        c.done.set()
        if c.abandoned:
            self._cleanup_locked(c)

    def _abandon(self, c: _Call) -> None:
        with self._mu:
            c.abandoned = True
            if c.final:
                self._cleanup_locked(c)
            elif c.wait and not self._ended_locked():
                self._start_locked(pb.SessionRequest(cancel=pb.CancelRequest(name=c.name, acquire_seq=c.seq)), True)
        if c.done.wait(CLEANUP_TIMEOUT):
            with self._mu:
                rel = c.cleanup
            if rel is not None:
                rel.done.wait(CLEANUP_TIMEOUT)

    def _cleanup_locked(self, c: _Call) -> None:
        """Release what an abandoned acquire was granted."""
        if c.err is not None or c.resp is None or self._ended_locked():
            return
        a = c.resp.acquire
        if a.acquired:
            c.cleanup = self._start_locked(_release_request(a.name, c.owner_key, a.token), True)

    def _resend_later_locked(self, c: _Call) -> None:
        """Send c again, with its sequence number, after a backoff."""
        d = self._client._pause(c.retries)
        c.retries += 1

        def again() -> None:
            with self._mu:
                if not self._ended_locked() and not c.final:
                    self._send_locked(c)

        t = threading.Timer(d, again)
        t.daemon = True
        t.start()

    # -- the stream --------------------------------------------------------

    def _handle(self, stream: Stream, resp: "pb.SessionResponse") -> None:
        """One message of the stream: a push, matched to its acquire by
        sequence number or to the leases, or an answer, matched by id. A
        mutating request the member did not apply is sent again with its
        sequence number."""
        with self._mu:
            if self._stream is not stream or self._ended_locked():
                return
            kind = resp.WhichOneof("kind")
            if kind == "grant":
                g = resp.grant
                c = self._by_seq.get(g.seq)
                if c is not None:
                    self._finish_locked(c, pb.SessionResponse(acquire=pb.AcquireResponse(
                        name=g.name, acquired=True, token=g.token, count=1, seq=g.seq)), None)
                return
            if kind == "wait_ended":
                w = resp.wait_ended
                c = self._by_seq.get(w.seq)
                if c is not None and c.wait:
                    msg = f"wait for lock {w.name!r} ended"
                    if w.deadlock_cycle:
                        msg += ": " + describe_cycle(w.deadlock_cycle)
                    ended: Error = from_wire(pb.Error(code=9, reason=w.reason, message=msg,
                                                      deadlock_cycle=w.deadlock_cycle))
                    if is_session_gone(ended):
                        ended = SessionLost(f"session lost while waiting for {w.name!r}", reason=ended.reason)
                    self._finish_locked(c, None, ended)
                return
            if kind == "session_lost":
                self._lost_locked(from_wire(resp.session_lost))
                return
            if kind == "hold_lost":
                h = resp.hold_lost
                self._leases.hold_lost(h.name, h.owner_key, h.token)
                return
            if kind == "revoke_requested":
                self._leases.revoke_requested(Revocation.from_pushed(resp.revoke_requested))
                return
            if kind == "holds":
                hs = resp.holds
                self._leases.server_holds_part([(h.name, h.owner_key, h.token) for h in hs.holds],
                                               [Revocation.from_pushed(r) for r in hs.revoking], hs.index, hs.done)
                return
            c = self._by_id.pop(resp.id, None)
            if c is None:
                return
            err = from_wire(resp.error) if resp.HasField("error") else None
            if c.keepalive:
                keepalive.keepalive_answered_locked(self, c, resp, err)
                return
            if err is not None:
                if c.seq and is_retryable(err):
                    if err.reason == "NOT_LEADER":
                        if err.leader_addr:
                            self._client._set_leader(err.leader_addr)
                        self._drop_stream_locked()  # the reconnect sends c again
                    else:
                        self._resend_later_locked(c)
                    return
                if is_session_gone(err):
                    self._lost_locked(err)
                    return
                self._finish_locked(c, resp, err)
                return
            if c.wait and resp.acquire.queued:
                return  # the grant, or the end of the wait, is its answer
            self._finish_locked(c, resp, None)

    def _drop_stream_locked(self) -> None:
        """Close the current stream: the stream thread resumes elsewhere."""
        if self._stream is not None:
            self._stream.close()

    def _stream_loop(self, stream: Optional[Stream]) -> None:
        """The session's stream thread: read the stream; when it breaks,
        resume on the leader, until the session ends. Resumes back off while
        streams keep breaking (a member that ends each at once must not
        cost a core)."""
        breaks = 0
        while stream is not None:
            attached = time.monotonic()
            err = self._read(stream)
            stream.close()
            with self._mu:
                if self._stream is stream:
                    self._stream = None
                    self._by_id.clear()
                if self._ended_locked():
                    return
                if self._closing is not None and self._closing.final:
                    return  # closed: close() ends the session
            if time.monotonic() - attached >= self._client.max_backoff:
                breaks = 0
            log.info("baton session %d: stream to %s broke (%s); resuming", self.id, stream.addr, err)
            if self.done.wait(self._client._pause(breaks)):
                return
            breaks += 1
            stream = self._reconnect()

    def _read(self, stream: Stream) -> Optional[Error]:
        """Hand the stream's answers to _handle until it ends; why it ended."""
        while True:
            try:
                msg = stream.recv()
            except StreamEnded as e:
                return e.error
            for cr in msg.responses:
                if cr.channel != CHANNEL:
                    continue
                if cr.HasField("response"):
                    self._handle(stream, cr.response)
                if cr.HasField("end"):
                    err = from_wire(cr.end.error) if cr.end.HasField("error") else None
                    if err is not None and is_session_gone(err):
                        with self._mu:
                            if self._stream is stream:
                                self._lost_locked(err)
                    return err

    def _reconnect(self) -> Optional[Stream]:
        """Attach a new stream on the leader with a resume, then send every
        unanswered mutating request again with its sequence number. None
        when the session ended."""
        with self._mu:
            self._last_id += 1
            resume = pb.SessionRequest(id=self._last_id, resume=pb.ResumeSession(
                session_id=self.id, secret=self._secret.reveal()))
            self._leases.server_holds = None  # a partial list from the stream that broke
        try:
            stream, resp, sent = self._connect(resume, bounded=False)
        except Error as e:
            with self._mu:
                if not self._ended_locked():
                    self._lost_locked(e)
            return None
        with self._mu:
            if self._ended_locked():
                stream.close()
                return None
            self._stream = stream
            self._by_id.clear()
            # A resume is a keepalive: the member extended the session from
            # when it received it.
            keepalive.extend_locked(self, sent, _seconds(resp.ttl) or self.ttl)
            pending = sorted(self._by_seq.values(), key=lambda c: c.seq)
            for c in pending:
                self._send_locked(c)
        log.info("baton session %d resumed on %s, %d requests sent again", self.id, stream.addr, len(pending))
        return stream

    def _connect(self, first: "pb.SessionRequest", bounded: bool) -> tuple[Stream, "pb.OpenSessionResponse", float]:
        """Open a stream whose first request is first on the leader,
        following leader hints and going round the endpoints. bounded
        limits it to the client's attempts; otherwise only the session's
        end or a final answer (the session is gone, refused) stops it."""
        cl = self._client
        last: Optional[Error] = None
        hops = 0
        attempt = 0
        while True:
            if bounded and attempt >= cl.max_attempts:
                raise Unavailable(f"gave up after {attempt} attempts: {last}", code=UNAVAILABLE)
            if self.done.is_set():
                raise self._err or SessionClosed("session closed")
            addr = cl._target()
            sent = time.monotonic()
            try:
                return self._dial(addr, first) + (sent,)
            except Error as e:
                last = e
                if e.reason == "NOT_LEADER":
                    if e.leader_addr and e.leader_addr != addr and hops < 3:
                        cl._set_leader(e.leader_addr)
                        hops += 1
                        attempt += 1
                        continue
                    cl._failed(addr)
                elif isinstance(e, (Unavailable, Timeout)) or e.reason == "OVERLOADED":
                    cl._failed(addr)
                else:
                    raise
            hops = 0
            log.debug("baton: session stream attempt on %s failed: %s", addr, last)
            if self.done.wait(cl._pause(attempt)):
                raise self._err or SessionClosed("session closed")
            attempt += 1

    def _dial(self, addr: str, first: "pb.SessionRequest") -> tuple[Stream, "pb.OpenSessionResponse"]:
        timeout = max(self.ttl / 2, 1.0)
        stream = Stream.dial(addr, timeout, self._client.tls, self._client.token)
        try:
            stream.set_timeout(timeout)
            stream.send(pb.SessionsRequest(requests=[pb.ChannelRequest(channel=CHANNEL, request=first)]))
            while True:
                try:
                    msg = stream.recv()
                except StreamEnded as e:
                    raise e.error or Unavailable(f"{addr} ended the stream", code=UNAVAILABLE) from None
                for i, cr in enumerate(msg.responses):
                    if cr.channel != CHANNEL:
                        continue
                    if cr.HasField("response"):
                        r = cr.response
                        if r.HasField("error"):
                            raise from_wire(r.error)
                        if r.HasField("open"):
                            stream.set_timeout(None)
                            self._client._set_leader(addr)
                            # What follows the answer in its message (a
                            # resume's list of holds) is the reader's.
                            if i + 1 < len(msg.responses):
                                stream.unread(pb.SessionsResponse(responses=msg.responses[i + 1:]))
                            return stream, r.open
                    if cr.HasField("end"):
                        raise (from_wire(cr.end.error) if cr.end.HasField("error")
                               else Unavailable(f"{addr} ended the channel", code=UNAVAILABLE))
        except BaseException:
            stream.close()
            raise

    # -- lock handles ------------------------------------------------------

    def lock(self, name: str, timeout: Optional[float] = None, *, owner_key: str = "") -> Lease:
        """Acquire the mutex name, waiting in its FIFO queue on the server:
        without timeout until it is granted (or the session ends), else at
        most timeout seconds (then Timeout, and the waiter has left the
        queue). The timeout bounds the wait, never the hold. Re-entering a
        hold of the same owner key returns at once (same token). Use the
        Lease as a context manager to release it on exit."""
        return self._acquire(name, owner_key, True, timeout, False, 0)

    def try_lock(self, name: str, *, owner_key: str = "") -> Lease:
        """Acquire the mutex name if nobody else holds it, answering at
        once: LockBusy (naming the holder) otherwise."""
        return self._acquire(name, owner_key, False, None, False, 0)

    def semaphore(self, name: str, permits: int, *, owner_key: str = "") -> "Semaphore":
        """A handle on name as a semaphore of permits holders. Every user of
        name must state the same permits while anyone holds or waits."""
        from baton.locks import Semaphore
        return Semaphore(self, name, permits, owner_key)

    def rwlock(self, name: str, *, max_readers: int = rules.DEFAULT_MAX_READERS, owner_key: str = "") -> "RWLock":
        """A handle on name as a read/write lock: many readers (up to
        max_readers, the same for every user of name) or one writer."""
        from baton.locks import RWLock
        return RWLock(self, name, max_readers, owner_key)

    # -- for tests of the deadline -------------------------------------------

    def _pause_keepalives(self) -> None:
        """Stop sending keepalives (tests: the session must then declare its
        leases lost before the server can hand their locks on)."""
        with self._mu:
            self._ka.paused = True


if TYPE_CHECKING:
    from baton.locks import RWLock, Semaphore


def _release_request(name: str, owner_key: str, token: int) -> "pb.SessionRequest":
    return pb.SessionRequest(release=pb.ReleaseRequest(name=name, owner_key=owner_key, token=token))


def _duration(seconds: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(int(round(seconds * 1e9)))
    return d


def _seconds(d: Duration) -> float:
    return d.seconds + d.nanos / 1e9
