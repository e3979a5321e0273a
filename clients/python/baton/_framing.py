"""Baton's session framing on a connection of its own (docs/PROTOCOL.md,
section 3): the preface, the hello, then frames of a kind byte, a varint
length and a payload, each message frame one SessionsRequest or
SessionsResponse.

A Stream owns one connection and a writer thread: callers queue requests
without ever blocking on the network (the session's lock is held while
queueing, and a stalled socket must not keep the keepalive thread from
declaring a lease lost on time). The session's stream thread reads.
"""

from __future__ import annotations

import queue
import socket
import ssl
import threading
from typing import Optional, Union

from baton._pb import pb
from baton.errors import Error, Unavailable, make_error, UNAVAILABLE

PREFACE = b"BATON-SESSIONS/1\r\n"
KIND_HELLO = 1
KIND_ACCEPT = 2
KIND_MESSAGE = 3
KIND_END = 4
MAX_RESPONSE_BYTES = 4 << 20
CLIENT_NAME = "baton-python/0.1"
ERROR_DOMAIN = "batonlock.io"


def append_varint(b: bytearray, n: int) -> None:
    while n >= 0x80:
        b.append((n & 0x7F) | 0x80)
        n >>= 7
    b.append(n)


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint at buf[i:] and the index after it."""
    n = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong varint")
        c = buf[i]
        i += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, i
        shift += 7


def frame(kind: int, payload: bytes) -> bytes:
    b = bytearray([kind])
    append_varint(b, len(payload))
    b += payload
    return bytes(b)


def hello(token: Optional[str]) -> bytes:
    """A hello frame's payload: field 1 authorization, field 2 client."""
    b = bytearray()
    for num, v in ((1, f"Bearer {token}" if token else ""), (2, CLIENT_NAME)):
        if v:
            raw = v.encode()
            b.append(num << 3 | 2)
            append_varint(b, len(raw))
            b += raw
    return bytes(b)


def _fields(buf: bytes) -> list[tuple[int, Union[int, bytes]]]:
    """The fields of a protobuf message: (number, value), a varint's value
    as an int and anything else as its bytes."""
    out: list[tuple[int, Union[int, bytes]]] = []
    i = 0
    while i < len(buf):
        tag, i = read_varint(buf, i)
        num, typ = tag >> 3, tag & 7
        if typ == 0:
            v, i = read_varint(buf, i)
            out.append((num, v))
            continue
        if typ == 2:
            n, i = read_varint(buf, i)
        elif typ in (1, 5):
            n = 8 if typ == 1 else 4
        else:
            raise ValueError(f"wire type {typ}")
        out.append((num, bytes(buf[i:i + n])))
        i += n
    return out


def _text(v: Union[int, bytes]) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else ""


def _blob(v: Union[int, bytes]) -> bytes:
    return v if isinstance(v, bytes) else b""


def parse_status(buf: bytes) -> Optional[Error]:
    """An end frame's google.rpc.Status as an exception (None for OK): the
    code, the message, and the Reason and leader of its ErrorInfo detail.
    Decoded by hand: google.rpc's messages are not among the generated ones."""
    code, message, reason, leader = 0, "", 0, ""
    for num, v in _fields(buf):
        if num == 1 and isinstance(v, int):
            code = v
        elif num == 2:
            message = _text(v)
        elif num == 3:
            detail = dict(_fields(_blob(v)))
            if not _text(detail.get(1, b"")).endswith("/google.rpc.ErrorInfo"):
                continue
            r, domain, meta = "", "", {}
            for n3, v3 in _fields(_blob(detail.get(2, b""))):
                if n3 == 1:
                    r = _text(v3)
                elif n3 == 2:
                    domain = _text(v3)
                elif n3 == 3:
                    kv = dict(_fields(_blob(v3)))
                    meta[_text(kv.get(1, b""))] = _text(kv.get(2, b""))
            if domain == ERROR_DOMAIN and r in pb.Reason.keys():
                reason, leader = pb.Reason.Value(r), meta.get("leader_addr", "")
    if code == 0:
        return None
    return make_error(code, reason, message, leader)


class StreamEnded(Exception):
    """The stream ended: ``error`` says why (None: cleanly)."""

    def __init__(self, error: Optional[Error]) -> None:
        super().__init__(str(error) if error else "stream ended")
        self.error = error


class Stream:
    """One Sessions stream on Baton's framing: a connection to one member."""

    def __init__(self, addr: str, sock: socket.socket) -> None:
        self.addr = addr
        self._sock = sock
        self._rfile = sock.makefile("rb")
        self._q: "queue.SimpleQueue[Optional[bytes]]" = queue.SimpleQueue()
        # _unread is what recv returns before reading on: the rest of a
        # message whose first answers a caller took (unread).
        self._unread: Optional["pb.SessionsResponse"] = None
        self._closed = threading.Event()
        self._writer = threading.Thread(target=self._write_loop, name=f"baton-writer-{addr}", daemon=True)

    @staticmethod
    def dial(addr: str, timeout: float, tls: Optional[ssl.SSLContext], token: Optional[str]) -> "Stream":
        """Connect to addr, send the preface and the hello, and read the
        accept, within timeout seconds."""
        host, _, port = addr.rpartition(":")
        try:
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except (OSError, ValueError) as e:
            raise Unavailable(f"connect to {addr}: {e}", code=UNAVAILABLE) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=host.strip("[]"))
            sock.sendall(PREFACE + frame(KIND_HELLO, hello(token)))
            s = Stream(addr, sock)
            kind, payload = s._read_frame()
            if kind == KIND_END:
                raise StreamEnded(parse_status(payload) or Unavailable(
                    f"{addr} ended the sessions stream as it opened", code=UNAVAILABLE))
            if kind != KIND_ACCEPT:
                raise Unavailable(f"{addr} does not speak Baton's session framing", code=UNAVAILABLE)
        except StreamEnded as e:
            sock.close()
            raise e.error or Unavailable("stream ended", code=UNAVAILABLE) from None
        except (OSError, ValueError) as e:
            sock.close()
            raise Unavailable(f"open a sessions stream on {addr}: {e}", code=UNAVAILABLE) from None
        except BaseException:
            sock.close()
            raise
        s._writer.start()
        return s

    def set_timeout(self, timeout: Optional[float]) -> None:
        self._sock.settimeout(timeout)

    def send(self, req: "pb.SessionsRequest") -> None:
        """Queue req for the writer; never blocks on the network."""
        if not self._closed.is_set():
            self._q.put(frame(KIND_MESSAGE, req.SerializeToString()))

    def _write_loop(self) -> None:
        while True:
            b = self._q.get()
            if b is None or self._closed.is_set():
                return
            try:
                self._sock.sendall(b)
            except OSError:
                self.close()  # the reader sees the connection end
                return

    def _read_exact(self, n: int) -> bytes:
        b = self._rfile.read(n)
        if b is None or len(b) < n:
            raise OSError("connection closed")
        return b

    def _read_frame(self) -> tuple[int, bytes]:
        kind = self._read_exact(1)[0]
        n = shift = 0
        while True:
            c = self._read_exact(1)[0]
            n |= (c & 0x7F) << shift
            if c < 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError("overlong frame length")
        if n > MAX_RESPONSE_BYTES:
            raise ValueError(f"frame of {n} bytes over the limit of {MAX_RESPONSE_BYTES}")
        return kind, self._read_exact(n)

    def unread(self, rest: "pb.SessionsResponse") -> None:
        """Make rest what the next recv returns (the reader's thread only)."""
        self._unread = rest

    def recv(self) -> "pb.SessionsResponse":
        """The next SessionsResponse; StreamEnded when the stream ended."""
        if self._unread is not None:
            m, self._unread = self._unread, None
            return m
        try:
            kind, payload = self._read_frame()
        except (OSError, ValueError) as e:
            try:
                self._rfile.close()  # the socket's descriptor goes with it
            except (OSError, ValueError):
                pass
            if self._closed.is_set():
                raise StreamEnded(None) from None
            raise StreamEnded(Unavailable(f"sessions stream to {self.addr}: connection lost: {e}",
                                          code=UNAVAILABLE)) from None
        if kind == KIND_END:
            raise StreamEnded(parse_status(payload))
        if kind != KIND_MESSAGE:
            raise StreamEnded(Unavailable(f"{self.addr} sent a frame of kind {kind}", code=UNAVAILABLE))
        m = pb.SessionsResponse()
        m.ParseFromString(payload)
        return m

    def close(self) -> None:
        """Close the connection: a reader blocked in recv returns."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._q.put(None)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
