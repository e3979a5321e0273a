"""A TCP proxy on loopback between a client and one member, to make the
network misbehave on purpose: answers (member -> client bytes) delayed by
a fixed time, or dropped, and connections cut or refused."""

from __future__ import annotations

import heapq
import socket
import threading
import time
from typing import Optional


class Proxy:
    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.delay = 0.0  # seconds every answer is held back
        self.drop_answers = False  # answers are read and thrown away
        self.refuse = False  # new connections are closed at once
        self._ls = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._ls.getsockname()[1]}"
        self._mu = threading.Lock()
        self._conns: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            if self.refuse:
                _close(c)
                continue
            try:
                u = socket.create_connection(self.upstream, timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._mu:
                self._conns += [c, u]
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        """Copy src to dst; answers go out `delay` after they arrived, in
        order, from a sender of their own."""
        q: list[tuple[float, int, Optional[bytes]]] = []
        cv = threading.Condition()
        n = 0

        def send() -> None:
            while True:
                with cv:
                    while not q or q[0][0] > time.monotonic():
                        cv.wait(None if not q else q[0][0] - time.monotonic())
                    _, _, b = heapq.heappop(q)
                if b is None:
                    _close(dst)
                    return
                try:
                    dst.sendall(b)
                except OSError:
                    return

        threading.Thread(target=send, daemon=True).start()
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if answers and self.drop_answers and b:
                continue
            with cv:
                n += 1
                heapq.heappush(q, (time.monotonic() + (self.delay if answers else 0.0), n, b or None))
                cv.notify()
            if not b:
                return

    def cut(self) -> None:
        """Close every connection through the proxy."""
        with self._mu:
            conns, self._conns = self._conns, []
        for s in conns:
            _close(s)

    def close(self) -> None:
        self._ls.close()
        self.cut()


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
