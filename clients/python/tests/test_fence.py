"""Fencing helpers: the headers the Go fence package reads, and a fenced
UPDATE that a database (sqlite3 here) decides atomically."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import pytest

import baton
from baton import fence


@dataclass
class Hold:
    name: str
    token: int


def test_headers_are_the_go_fence_packages() -> None:
    assert fence.headers(Hold("jobs/42", 17)) == {"Baton-Lock": "jobs/42", "Baton-Fencing-Token": "17"}
    assert fence.escape_lock("a b%c/é") == "a%20b%25c/%C3%A9"
    assert fence.parse_headers(fence.headers(Hold("a b%c/é", 9))) == ("a b%c/é", 9)
    assert fence.parse_headers({}) is None
    for bad in (0, -1, 2**63):
        with pytest.raises(ValueError):
            fence.headers(Hold("x", bad))


def test_fenced_update_refuses_an_older_token() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE stock (item TEXT PRIMARY KEY, n INTEGER, fence INTEGER NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO stock (item, n) VALUES ('apple', 10)")

    def write(token: int, n: int) -> int:
        q, args = fence.fenced_update("stock", "n = ?", "item = ?", Hold("stock/apple", token),
                                      set_args=[n], where_args=["apple"])
        return db.execute(q, args).rowcount

    assert write(5, 9) == 1
    assert write(7, 8) == 1   # a newer holder
    assert write(5, 100) == 0  # the old holder, after a pause: refused
    assert db.execute("SELECT n, fence FROM stock").fetchone() == (8, 7)
    q, _ = fence.fenced_update("t", "a = %s", "id = %s", Hold("x", 1), paramstyle="format")
    assert q == "UPDATE t SET a = %s, fence = %s WHERE (id = %s) AND fence <= %s"


def test_a_lease_is_a_fence_holder(client: baton.Client, name: str) -> None:
    with client.session() as s, s.lock(name) as lease:
        assert fence.headers(lease) == {"Baton-Lock": name, "Baton-Fencing-Token": str(lease.token)}
        assert fence.token_param(lease) == lease.token
