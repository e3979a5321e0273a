"""What a request may contain, as the members check it (api/rules in the
Go tree): checked here before sending, so that a bad name fails alone, at
once, with InvalidArgument, and never reaches the stream."""

from __future__ import annotations

import unicodedata

from baton.errors import InvalidArgument

MIN_TTL = 1.0
MAX_TTL = 600.0
DEFAULT_TTL = 10.0
MAX_NAME_LEN = 512
MAX_OWNER_LEN = 256
MAX_HOLDERS = 10000
MAX_WAIT_TIMEOUT = 24 * 3600.0
# The reader limit of a read/write lock unless stated: every user of one
# lock must state the same, and the Go client's default is the largest.
DEFAULT_MAX_READERS = MAX_HOLDERS
# A revocation's grace, in seconds (api/rules): below a second the holder
# could not hear of it before its hold ends (that is a CasRelease); a
# holder that needs more than an hour is better asked again. The default
# is time for a command to finish its step and release.
MIN_REVOKE_GRACE = 1.0
MAX_REVOKE_GRACE = 3600.0
DEFAULT_REVOKE_GRACE = 30.0


def check_lock_name(name: str) -> None:
    """1..512 bytes of UTF-8 without control characters."""
    if not isinstance(name, str) or name == "":
        raise InvalidArgument("lock name is empty")
    raw = name.encode("utf-8", errors="surrogatepass")
    if len(raw) > MAX_NAME_LEN:
        raise InvalidArgument(f"lock name is {len(raw)} bytes; the limit is {MAX_NAME_LEN}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"lock name {name!r} is not valid UTF-8") from None
    for i, ch in enumerate(name):
        if unicodedata.category(ch) == "Cc":
            raise InvalidArgument(f"lock name {name!r} has control character U+{ord(ch):04X} at {i}")


def check_owner(label: str, what: str) -> None:
    """An owner label or owner key: 0..256 bytes of UTF-8."""
    try:
        n = len(label.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} {label!r} is not valid UTF-8") from None
    if n > MAX_OWNER_LEN:
        raise InvalidArgument(f"{what} is {n} bytes; the limit is {MAX_OWNER_LEN}")


def check_ttl(ttl: float) -> None:
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise InvalidArgument(f"ttl {ttl}s is outside {MIN_TTL}s..{MAX_TTL}s")


def check_wait_timeout(timeout: float) -> None:
    if not 0 < timeout <= MAX_WAIT_TIMEOUT:
        raise InvalidArgument(f"wait timeout {timeout}s; want more than 0, at most {MAX_WAIT_TIMEOUT}s")


def check_holders(n: int, what: str) -> None:
    if not 1 <= n <= MAX_HOLDERS:
        raise InvalidArgument(f"{what} {n}; want 1..{MAX_HOLDERS}")
