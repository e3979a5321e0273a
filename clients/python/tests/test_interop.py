"""A Python program and a Go program (the `baton lock` CLI) holding the
same lock name exclude each other."""

from __future__ import annotations

import subprocess

import baton
import pytest
from harness import baton_bin, wait_for

EXIT_NOT_ACQUIRED = 75  # `baton lock --no-wait` on a held lock


def go_lock(endpoints: str, name: str, *args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([baton_bin(), "lock", "--endpoints", endpoints, *args, name, "--", "sh", "-c", "echo held; read line"],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_python_and_go_exclude_each_other(client: baton.Client, endpoints: str, name: str) -> None:
    with client.session(owner="pytest/interop") as s:
        lease = s.lock(name)
        # Go cannot take what Python holds.
        p = go_lock(endpoints, name, "--no-wait")
        out, err = p.communicate(timeout=60)
        assert p.returncode == EXIT_NOT_ACQUIRED, (out, err)
        assert "held" not in out
        lease.release()
        # Go takes it now, and Python cannot.
        g = go_lock(endpoints, name, "--wait", "30s", stdin=subprocess.PIPE)
        try:
            assert g.stdout is not None and g.stdout.readline().strip() == "held"
            with pytest.raises(baton.LockBusy) as e:
                s.try_lock(name)
            assert e.value.holder is not None and e.value.holder.session_id != s.id
            go_token = e.value.holder.token
            assert go_token > lease.token
        finally:
            assert g.stdin is not None
            g.stdin.write("done\n")
            g.stdin.close()
            assert g.wait(timeout=60) == 0
        # Go released it on exit: Python takes it with a larger token.
        again = wait_for("the lock free again", lambda: _try(s, name))
        assert again.token > go_token
        again.release()


def _try(s: baton.Session, name: str) -> "baton.Lease | None":
    try:
        return s.try_lock(name)
    except baton.LockBusy:
        return None
