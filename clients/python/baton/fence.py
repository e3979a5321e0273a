"""Passing a lease's fencing token to storage, as the Go fence package
does, so that storage can refuse a writer whose lock passed to someone
newer (docs/PROTOCOL.md, section 10).

HTTP: the headers Baton-Lock (the lock's name, escaped) and
Baton-Fencing-Token (the token in decimal), which the Go fence package's
Guard and middleware read. SQL: a conditional UPDATE that records the
token in a fence column and writes only where the stored fence is not
newer, decided by the database atomically with the write.
"""

from __future__ import annotations

from typing import Any, Mapping, MutableMapping, Optional, Protocol, Sequence

LOCK_HEADER = "Baton-Lock"
TOKEN_HEADER = "Baton-Fencing-Token"
MAX_TOKEN = 2**63 - 1  # a BIGINT; Baton's tokens are log indexes


class Holder(Protocol):
    """Anything with a lock name and a fencing token: a baton.Lease."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> int: ...


def escape_lock(name: str) -> str:
    """The lock's name for a header value: every byte outside '!'..'~',
    and '%', as %XX ("jobs/42" stays "jobs/42")."""
    out = []
    for c in name.encode("utf-8"):
        out.append(chr(c) if 0x20 < c < 0x7F and c != 0x25 else f"%{c:02X}")
    return "".join(out)


def headers(holder: Holder) -> dict[str, str]:
    """The fencing headers for a request made under holder's lock."""
    _check_token(holder.token)
    return {LOCK_HEADER: escape_lock(holder.name), TOKEN_HEADER: str(holder.token)}


def set_headers(h: MutableMapping[str, str], holder: Holder) -> None:
    """Set the fencing headers on h: a dict, or a urllib Request's headers
    through ``for k, v in headers(lease).items(): req.add_header(k, v)``."""
    h.update(headers(holder))


def fenced_update(table: str, set_clause: str, where: str, holder: Holder, *,
                  fence_column: str = "fence", paramstyle: str = "qmark",
                  set_args: Sequence[Any] = (), where_args: Sequence[Any] = ()) -> tuple[str, list[Any]]:
    """A fenced UPDATE and its parameters, for DB-API's ``execute``:

        UPDATE table SET set_clause, fence = ? WHERE (where) AND fence <= ?

    with the token as the last two parameters. set_clause and where use the
    driver's placeholders for set_args and where_args. paramstyle is the
    driver's (sqlite3: "qmark"; psycopg and MySQLdb: "format"). The
    statement changes no row when a newer holder already wrote: check the
    cursor's rowcount. fence_column is a BIGINT NOT NULL DEFAULT 0."""
    token = _check_token(holder.token)
    if not table or not set_clause or not where:
        raise ValueError("a fenced update needs table, set_clause and where")
    p = {"qmark": "?", "format": "%s"}.get(paramstyle)
    if p is None:
        raise ValueError(f"paramstyle {paramstyle!r}; want qmark or format")
    query = (f"UPDATE {table} SET {set_clause}, {fence_column} = {p} "
             f"WHERE ({where}) AND {fence_column} <= {p}")
    return query, [*set_args, token, *where_args, token]


def token_param(holder: Holder) -> int:
    """The token as an SQL parameter (a BIGINT): for statements of your
    own, such as INSERT ... ON CONFLICT ... WHERE t.fence <= excluded.fence."""
    return _check_token(holder.token)


def _check_token(token: Optional[int]) -> int:
    if not isinstance(token, int) or not 1 <= token <= MAX_TOKEN:
        raise ValueError(f"fencing token {token!r} is not from 1 to 2^63-1")
    return token


def parse_headers(h: Mapping[str, str]) -> Optional[tuple[str, int]]:
    """The (lock, token) a request's headers claim, or None without them;
    ValueError when they cannot be read. For Python services that check
    tokens themselves."""
    lock, tok = h.get(LOCK_HEADER), h.get(TOKEN_HEADER)
    if lock is None and tok is None:
        return None
    if lock is None or tok is None or not tok.isdigit():
        raise ValueError(f"want one {LOCK_HEADER} and one decimal {TOKEN_HEADER}")
    raw = bytearray()
    i = 0
    while i < len(lock):
        if lock[i] == "%":
            raw.append(int(lock[i + 1:i + 3], 16))
            i += 3
        else:
            raw += lock[i].encode()
            i += 1
    return raw.decode("utf-8"), _check_token(int(tok))
