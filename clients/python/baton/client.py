"""The client: the cluster's addresses, which member leads, and the pause
between attempts (docs/PROTOCOL.md, section 2). Sessions carry locks
(session.py); reads go over the HTTP/JSON face with the standard library."""

from __future__ import annotations

import json
import os
import random
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Optional, Sequence, TypeVar, Union

from google.protobuf import json_format
from google.protobuf.message import Message

from baton import revoke, rules
from baton._pb import pb
from baton.errors import Error, Holder, InvalidArgument, Unavailable, make_error, UNAVAILABLE
from baton.session import Session

# Defaults, as the Go client's (options.go): attempts over a few seconds,
# more than an election takes, and pauses that double from 20 ms to 1 s.
DEFAULT_MAX_ATTEMPTS = 20
DEFAULT_BACKOFF = 0.02
DEFAULT_MAX_BACKOFF = 1.0
HTTP_TIMEOUT = 10.0

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class LockState:
    """A lock as a member reads it (Client.get_lock)."""

    name: str
    limit: int
    holders: list[Holder] = field(default_factory=list)
    waiters: list[int] = field(default_factory=list)  # their session ids, in queue order


class Client:
    """A handle on a Baton cluster. Make one with baton.connect(); open
    sessions with session(). Safe for use from many threads."""

    def __init__(self, endpoints: Sequence[str], *, tls: Optional[ssl.SSLContext] = None,
                 token: Optional[str] = None, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 backoff: float = DEFAULT_BACKOFF, max_backoff: float = DEFAULT_MAX_BACKOFF) -> None:
        eps = [e.strip() for e in endpoints if e.strip()]
        if not eps:
            raise InvalidArgument("no endpoints")
        for e in eps:
            host, sep, port = e.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise InvalidArgument(f"endpoint {e!r} is not host:port")
        if max_attempts < 1 or not 0 < backoff <= max_backoff:
            raise InvalidArgument("max_attempts >= 1 and 0 < backoff <= max_backoff")
        self.endpoints = eps
        self.tls = tls
        self.token = token
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._mu = threading.Lock()
        self._leader: Optional[str] = None
        self._next = 0
        self._sessions: set[Session] = set()
        self._closed = False

    def session(self, ttl: float = rules.DEFAULT_TTL, owner: Optional[str] = None) -> Session:
        """Open a session on the leader and start its keepalive thread. ttl
        is in seconds (1..600); owner labels it for operators (default
        host/pid/python). Returns once the session exists, or raises
        Unavailable when no leader answered within the attempts. Use it as
        a context manager to close it on exit."""
        if owner is None:
            owner = f"{socket.gethostname()}/{os.getpid()}/python"
        s = Session(self, float(ttl), owner)
        with self._mu:
            if self._closed:
                raise Error("client closed")
            self._sessions.add(s)
        try:
            s._open()
        except BaseException:
            self._forget(s)
            raise
        return s

    def close(self) -> None:
        """Close every session of the client."""
        with self._mu:
            self._closed = True
            sessions = list(self._sessions)
        for s in sessions:
            s.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<baton.Client endpoints={','.join(self.endpoints)}>"

    # -- reads over HTTP/JSON ---------------------------------------------

    def check(self, name: str, token: int) -> bool:
        """Whether token is the current hold of lock name, answered
        linearizably by the leader: for resources that cannot keep the
        largest token they saw."""
        rules.check_lock_name(name)
        return self._get("/v1/check", {"name": name, "token": str(token)}, pb.CheckResponse()).held

    def get_lock(self, name: str) -> Optional[LockState]:
        """The lock's holders and waiters now (None when nobody holds or
        waits for it), read linearizably on the leader."""
        rules.check_lock_name(name)
        out = self._get("/v1/lock", {"name": name}, pb.GetResponse())
        if not out.HasField("lock"):
            return None
        lk = out.lock
        return LockState(name=lk.name, limit=lk.limit or 1, holders=[Holder.from_pb(h) for h in lk.holders],
                         waiters=[w.session_id for w in lk.waiters])

    def revoke_lock(self, name: str, grace: "revoke.Grace" = rules.DEFAULT_REVOKE_GRACE,
                    token: Optional[int] = None) -> "list[revoke.Revocation]":
        """Ask the holders of lock name to let go within grace (seconds, or
        a timedelta: 1 s .. 1 h in whole milliseconds; default 30 s) and
        return the holds asked, each a Revocation with its deadline. With
        token, only the hold with that token (the one the caller saw) is
        asked; without, every holder (each reader of a read/write lock,
        each permit of a semaphore). A hold already being revoked keeps its
        first revocation, so asking twice is harmless.

        Each holder's leases are told at once (Lease.revoke_requested); a
        hold still there when the grace passes is ended by the leader. With
        authentication on it needs admin over the name. Raises
        InvalidArgument for a bad name, grace or token (checked before
        sending), NotHeld if nobody holds the lock (reason LOCK_NOT_FOUND)
        or no hold has token (TOKEN_MISMATCH), PermissionDenied without
        the permission; nothing changes then."""
        return revoke.revoke_lock(self, name, grace, token)

    def _get(self, path: str, params: dict[str, str], out: M) -> M:
        """A read: retried on any member until one answers."""
        return self._http("GET", path, params, None, out)

    def _post(self, path: str, body: Message, out: M) -> M:
        """A change: retried only when it surely did not apply (NOT_LEADER)
        or when no member could be reached; an answer after an attempt whose
        connection failed says that attempt may have applied."""
        return self._http("POST", path, {}, body, out)

    def _http(self, method: str, path: str, params: dict[str, str], body: Optional[Message], out: M) -> M:
        last: Optional[Error] = None
        maybe_applied = False  # a change whose attempt failed mid-call may have taken effect
        data = None
        if body is not None:
            data = json_format.MessageToJson(body, preserving_proto_field_name=True).encode()

        def uncertain(err: Error) -> Error:
            if not maybe_applied:
                return err
            return type(err)(f"{err.message}; an earlier attempt may have applied before its connection broke",
                             code=err.code, reason=err.reason, leader_addr=err.leader_addr)

        for attempt in range(self.max_attempts):
            addr = self._target()
            scheme = "https" if self.tls else "http"
            url = f"{scheme}://{addr}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
            req = urllib.request.Request(url, data=data, method=method)
            if data is not None:
                req.add_header("Content-Type", "application/json")
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT, context=self.tls) as r:
                    self._set_leader(addr)
                    return json_format.Parse(r.read(), out, ignore_unknown_fields=True)
            except urllib.error.HTTPError as e:
                last = _http_error(e)
            except (OSError, ValueError) as e:
                last = Unavailable(f"{addr}: {e}", code=UNAVAILABLE)
                # A refused connection sent nothing; any other failure may
                # have cut the call off after the member applied it.
                refused = isinstance(getattr(e, "reason", e), ConnectionRefusedError)
                maybe_applied = maybe_applied or (body is not None and not refused)
            if last.reason == "NOT_LEADER" and last.leader_addr and last.leader_addr != addr:
                self._set_leader(last.leader_addr)
                continue
            if not isinstance(last, Unavailable) or (body is not None and last.reason == "OUTCOME_UNKNOWN"):
                raise uncertain(last)
            self._failed(addr)
            time.sleep(self._pause(attempt))
        raise uncertain(Unavailable(f"gave up after {self.max_attempts} attempts: {last}", code=UNAVAILABLE))

    # -- where to go ---------------------------------------------------------

    def _target(self) -> str:
        """The member believed to lead, else the next endpoint in turn."""
        with self._mu:
            return self._leader or self.endpoints[self._next % len(self.endpoints)]

    def _set_leader(self, addr: str) -> None:
        with self._mu:
            self._leader = addr

    def _failed(self, addr: str) -> None:
        """addr did not serve: forget it as leader and move on."""
        with self._mu:
            if self._leader == addr:
                self._leader = None
            if self.endpoints[self._next % len(self.endpoints)] == addr:
                self._next += 1

    def _pause(self, n: int) -> float:
        """The pause before attempt n (from 0): d = min(backoff * 2^n,
        max_backoff), drawn from d/2..d."""
        d = min(self.backoff * (2 ** min(n, 30)), self.max_backoff)
        return d / 2 + random.uniform(0, d / 2)

    def _forget(self, s: Session) -> None:
        with self._mu:
            self._sessions.discard(s)


def _http_error(e: "urllib.error.HTTPError") -> Error:
    """A grpc-gateway error body as an exception."""
    try:
        body = json.loads(e.read() or b"{}")
    except ValueError:
        body = {}
    reason, leader = 0, ""
    for d in body.get("details") or []:
        if d.get("@type", "").endswith("google.rpc.ErrorInfo") and d.get("domain") == "batonlock.io":
            r = d.get("reason", "")
            reason = pb.Reason.Value(r) if r in pb.Reason.keys() else 0
            leader = (d.get("metadata") or {}).get("leader_addr", "")
    return make_error(int(body.get("code", 0)) or UNAVAILABLE, reason,
                      str(body.get("message") or f"HTTP {e.code}"), leader)


def connect(endpoints: Union[str, Sequence[str]], *, tls: Optional[ssl.SSLContext] = None,
            token: Optional[str] = None, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
            backoff: float = DEFAULT_BACKOFF, max_backoff: float = DEFAULT_MAX_BACKOFF) -> Client:
    """A client of the cluster at endpoints: "host:port,host:port" or a
    list, any members (the client finds the leader). tls is the
    ssl.SSLContext for members that serve TLS; token a bearer token when
    authentication is on. Nothing is sent until a session is opened or a
    read made."""
    eps = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    return Client(eps, tls=tls, token=token, max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff)
