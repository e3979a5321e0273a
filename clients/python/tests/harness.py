"""Real `baton server` members for the tests: started from a binary
(BATON_BIN, or built once with `go build ./cmd/baton` from the repository
root) in a temporary directory, on free loopback ports, and stopped by
PID. Every wait polls with a deadline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional, TypeVar

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")

_built: Optional[str] = None


def baton_bin() -> str:
    """The baton binary: BATON_BIN, or one built from this repository."""
    global _built
    if os.environ.get("BATON_BIN"):
        return os.environ["BATON_BIN"]
    if _built is None:
        out = Path(tempfile.mkdtemp(prefix="baton-pytest-bin-")) / "baton"
        subprocess.run(["go", "build", "-o", str(out), "./cmd/baton"], cwd=REPO, check=True, timeout=600)
        _built = str(out)
    return _built


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, f: Callable[[], Optional[T]], timeout: float = 30.0, every: float = 0.02) -> T:
    """Poll f until it returns something other than None or False; fail
    after timeout seconds."""
    end = time.monotonic() + timeout
    while True:
        v = f()
        if v is not None and v is not False:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def status(addr: str) -> Optional[dict]:
    try:
        with urllib.request.urlopen(f"http://{addr}/v1/status", timeout=2) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


class Cluster:
    """n members of one cluster, each its own process."""

    def __init__(self, n: int = 1) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="baton-pytest-"))
        self.names = [f"n{i + 1}" for i in range(n)]
        self.client = {name: f"127.0.0.1:{free_port()}" for name in self.names}
        self.peer = {name: f"127.0.0.1:{free_port()}" for name in self.names}
        self.procs: dict[str, subprocess.Popen] = {}
        initial = ",".join(f"{m}={self.peer[m]}" for m in self.names) if n > 1 else ""
        for name in self.names:
            args = [baton_bin(), "server", "--name", name, "--data-dir", str(self.dir / name),
                    "--client-addr", self.client[name], "--peer-addr", self.peer[name], "--log-level", "warn"]
            if initial:
                args += ["--initial-cluster", initial]
            log = open(self.dir / f"{name}.log", "wb")
            self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
        self.leader()

    @property
    def endpoints(self) -> str:
        return ",".join(self.client[m] for m in self.names)

    def leader(self, exclude: str = "") -> str:
        """The name of the leader every live member agrees on."""
        def find() -> Optional[str]:
            for name in self.live():
                st = status(self.client[name])
                if st and st.get("leader") and st.get("leader") != exclude and st.get("role") == "leader":
                    return st["leader"]
            return None
        return wait_for("a leader", find)

    def cli(self, *args: str, token: str = "") -> str:
        """Run `baton ARGS --endpoints ...` against the cluster (with a
        user's token when given) and return what it printed on stdout."""
        env = dict(os.environ, BATON_AUTH_TOKEN=token) if token else None
        out = subprocess.run([baton_bin(), *args, "--endpoints", self.endpoints], env=env,
                             check=True, timeout=30, capture_output=True, text=True)
        return out.stdout.strip()

    def live(self) -> list[str]:
        return [m for m in self.names if self.procs[m].poll() is None]

    def kill(self, name: str) -> None:
        """SIGKILL the member, by its PID."""
        p = self.procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
        shutil.rmtree(self.dir, ignore_errors=True)
