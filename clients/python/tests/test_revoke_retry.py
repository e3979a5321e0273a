"""Which failures of a revoke the client retries, against fake members
(the standard library's HTTP server) that answer as a member would: a
change is sent again only when it surely did not apply (NOT_LEADER) or
no member answered, never after OUTCOME_UNKNOWN."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

import baton


class Fake:
    """A fake member: answers each POST with the next of its answers
    (status, JSON body) and records the requests' bodies."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict]] = []
        self.bodies: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the base class's name)
                fake.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status, body = fake.answers.pop(0)
                out = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def refusal(code: int, reason: str, message: str, leader: str = "") -> dict:
    return {"code": code, "message": message, "details": [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "batonlock.io",
        "metadata": {"leader_addr": leader} if leader else {}}]}


REVOKED = {"revoked": [{"session_id": "5", "owner_key": "k", "token": "42",
                        "revoke_deadline": "2030-01-02T03:04:05.678Z", "revoke_grace": "90s"}]}


@pytest.fixture
def fakes() -> Iterator[tuple[Fake, Fake]]:
    a, b = Fake(), Fake()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_not_leader_is_followed_to_the_leader(fakes: tuple[Fake, Fake]) -> None:
    follower, leader = fakes
    follower.answers = [(503, refusal(14, "NOT_LEADER", "not the leader", leader.addr))]
    leader.answers = [(200, REVOKED)]
    (r,) = baton.connect(follower.addr).revoke_lock("jobs/x", grace=90, token=42)
    assert (r.name, r.owner_key, r.token, r.grace) == ("jobs/x", "k", 42, 90.0)
    assert r.deadline is not None and r.deadline.isoformat() == "2030-01-02T03:04:05.678000+00:00"
    assert follower.bodies == leader.bodies == [{"name": "jobs/x", "token": "42", "grace": "90s"}]


def test_outcome_unknown_is_not_sent_again(fakes: tuple[Fake, Fake]) -> None:
    a, _ = fakes
    a.answers = [(503, refusal(14, "OUTCOME_UNKNOWN", "leadership lost before commit"))] + [(200, REVOKED)] * 3
    with pytest.raises(baton.Unavailable) as e:
        baton.connect(a.addr, backoff=0.001).revoke_lock("jobs/x")
    assert e.value.reason == "OUTCOME_UNKNOWN" and len(a.bodies) == 1
    assert a.bodies[0] == {"name": "jobs/x", "grace": "30s"}  # the default grace, every holder


def test_an_unreachable_member_is_passed_over(fakes: tuple[Fake, Fake]) -> None:
    a, _ = fakes
    a.answers = [(200, REVOKED)]
    (r,) = baton.connect(["127.0.0.1:1", a.addr], backoff=0.001).revoke_lock("jobs/x", grace=90)
    assert r.token == 42 and len(a.bodies) == 1


def test_an_answer_after_a_call_cut_off_says_it_may_have_applied(fakes: tuple[Fake, Fake]) -> None:
    """A member that took the request and closed the connection may have
    applied it: the next member's "not held" may be that revoke's doing
    (its hold released meanwhile), and says so. After a refused
    connection, which sent nothing, it does not."""
    a, _ = fakes
    cutter = socket.create_server(("127.0.0.1", 0))

    def cut() -> None:
        c, _ = cutter.accept()
        c.recv(65536)
        c.close()

    threading.Thread(target=cut, daemon=True).start()
    try:
        a.answers = [(404, refusal(5, "LOCK_NOT_FOUND", 'lock "jobs/x" is not held'))] * 2
        cut_addr = f"127.0.0.1:{cutter.getsockname()[1]}"
        with pytest.raises(baton.NotHeld) as e:
            baton.connect([cut_addr, a.addr], backoff=0.001).revoke_lock("jobs/x")
        assert "may have applied" in str(e.value) and e.value.reason == "LOCK_NOT_FOUND"
        with pytest.raises(baton.NotHeld) as e:
            baton.connect(["127.0.0.1:1", a.addr], backoff=0.001).revoke_lock("jobs/x")
        assert "may have applied" not in str(e.value)
    finally:
        cutter.close()
