"""Keepalives and the client's deadline: where the client decides that its
session, and with it every lease, is lost (docs/PROTOCOL.md, section 6).

A keepalive goes every TTL/3. The answer to one queued at ``sent`` moves
the deadline to ``sent + TTL - safety_margin(TTL)``, which passes before
the member's own deadline, counted from when the keepalive arrived. The
time of the answer plays no part. When the deadline passes unanswered,
every lease is lost and the session is in jeopardy; a TTL later, the
session is lost.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from baton._pb import pb
from baton.errors import Jeopardy, SessionLost

if TYPE_CHECKING:
    from baton.session import Session

log = logging.getLogger("baton")

# The client's safety margin, as the Go client's (keepalive.go): a
# difference in clock rate between client and leader of up to 1% of the TTL
# (quartz is off by ~0.01%), at least 50 ms, plus 50 ms for the client to
# notice the deadline once it passed (thread scheduling, the GIL, a GC
# pause) and set the leases' lost events.
CLOCK_RATE_ALLOWANCE = 0.01
MIN_CLOCK_MARGIN = 0.05
SCHEDULING_ALLOWANCE = 0.05


def safety_margin(ttl: float) -> float:
    """The margin subtracted from a session of ttl seconds:
    max(1% of ttl, 50 ms) + 50 ms."""
    return max(ttl * CLOCK_RATE_ALLOWANCE, MIN_CLOCK_MARGIN) + SCHEDULING_ALLOWANCE


class KeepAlive:
    """The session's liveness as the client sees it. Guarded by the
    session's lock."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.margin = safety_margin(ttl)
        # The conservative deadline, a time.monotonic() reading: every
        # lease of the session is valid until then.
        self.deadline = 0.0
        # Tests of the deadline stop the keepalives with this.
        self.paused = False


def extend_locked(s: "Session", sent: float, ttl: float) -> None:
    """A keepalive (or resume, or the open) queued at sent was answered
    with ttl: the deadline moves to sent + ttl - margin. An answer in time
    after a jeopardy makes the session healthy again."""
    ka = s._ka
    nd = sent + ttl - ka.margin
    if nd > ka.deadline:
        ka.deadline = nd
    if s._state == "jeopardy" and time.monotonic() < nd:
        log.info("baton session %d safe again", s.id)
        s._state = "healthy"
    s._cond.notify_all()


def send_keepalive_locked(s: "Session") -> None:
    """Queue a keepalive on the current stream, noting when: its answer
    counts the deadline from then."""
    if s._ka.paused or s._stream is None or s._ended_locked():
        return  # while reconnecting, the resume is the keepalive
    req = pb.SessionRequest(keep_alive=pb.KeepAliveRequest(session_id=s.id))
    c = s._new_call(req, keepalive=True)
    c.sent = time.monotonic()
    s._send_locked(c)


def check_deadline_locked(s: "Session") -> None:
    """Where the client decides its leases are lost: once the deadline
    passed with no keepalive answered, every lease is lost (Jeopardy); once
    a TTL more passed, the session is lost."""
    now = time.monotonic()
    ka = s._ka
    if s._state == "healthy" and now >= ka.deadline:
        log.warning("baton session %d in jeopardy: no keepalive answer before the deadline (%.3fs late)",
                    s.id, now - ka.deadline)
        s._leases.end_all(Jeopardy("session in jeopardy: no keepalive answer before the conservative deadline"))
        s._state = "jeopardy"
        s._cond.notify_all()
    elif s._state == "jeopardy" and now >= ka.deadline + ka.ttl:
        s._lost_locked(SessionLost(f"no answer from the cluster for a TTL ({ka.ttl}s) past the deadline"))


def keepalive_loop(s: "Session") -> None:
    """The session's keepalive thread: a keepalive every TTL/3, and the
    deadline checked when it passes (and, in jeopardy, a TTL past it)."""
    period = s._ka.ttl / 3
    next_send = time.monotonic() + period
    with s._cond:
        while not s._ended_locked():
            if time.monotonic() >= next_send:
                send_keepalive_locked(s)
                next_send += period
                next_send = max(next_send, time.monotonic())
            check_deadline_locked(s)
            if s._ended_locked():
                return
            due = s._ka.deadline if s._state == "healthy" else s._ka.deadline + s._ka.ttl
            s._cond.wait(max(min(next_send, due) - time.monotonic(), 0.0))


def keepalive_answered_locked(s: "Session", c: "object", resp: "pb.SessionResponse", err: "object") -> None:
    """The answer to keepalive c: the deadline moves, or the session
    follows the leader, or it is lost."""
    from baton.errors import Error, Unavailable  # the cycle is import-time only

    if err is None:
        ttl = resp.keep_alive.ttl.ToTimedelta().total_seconds() if resp.keep_alive.HasField("ttl") else 0
        extend_locked(s, c.sent, ttl if ttl > 0 else s._ka.ttl)  # type: ignore[attr-defined]
        return
    assert isinstance(err, Error)
    if isinstance(err, Unavailable) and err.reason == "NOT_LEADER":
        if err.leader_addr:
            s._client._set_leader(err.leader_addr)
        s._drop_stream_locked()
    elif err.reason in ("SESSION_NOT_FOUND", "SESSION_EXPIRED", "BLACKLISTED"):
        s._lost_locked(err)
    else:
        log.warning("baton session %d: keepalive failed: %s", s.id, err)
