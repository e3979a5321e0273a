"""Semaphores and read/write locks: handles that state a lock's kind on
every acquire (docs/PROTOCOL.md, section 8). A mutex needs no handle:
Session.lock and Session.try_lock take it directly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from baton import rules
from baton.leases import Lease

if TYPE_CHECKING:
    from baton.session import Session


class Semaphore:
    """A lock that admits up to ``permits`` holders at once, each holding
    one permit with its own fencing token, granted in FIFO order. The
    handle belongs to one (session, owner key): acquiring again under the
    same key re-enters the permit it holds; a second permit for the same
    session needs another owner key."""

    def __init__(self, session: "Session", name: str, permits: int, owner_key: str = "") -> None:
        rules.check_holders(permits, f"semaphore {name!r} of permits")
        self.session, self.name, self.permits, self.owner_key = session, name, permits, owner_key

    def acquire(self, timeout: Optional[float] = None) -> Lease:
        """Take a permit, waiting in FIFO order (at most timeout seconds)."""
        return self.session._acquire(self.name, self.owner_key, True, timeout, True, self.permits)

    def try_acquire(self) -> Lease:
        """Take a permit if one is free now; LockBusy otherwise."""
        return self.session._acquire(self.name, self.owner_key, False, None, True, self.permits)


class RWLock:
    """A read/write lock: many readers at once (up to max_readers) or one
    writer. The queue is FIFO across both, so readers arriving after a
    waiting writer wait for it. Reads and writes of one handle share its
    (session, owner key): while it holds the lock in one mode, acquiring it
    in the other fails with LimitMismatch (a reader cannot upgrade)."""

    def __init__(self, session: "Session", name: str, max_readers: int, owner_key: str = "") -> None:
        rules.check_holders(max_readers, f"read/write lock {name!r} with readers")
        self.session, self.name, self.max_readers, self.owner_key = session, name, max_readers, owner_key

    def read_lock(self, timeout: Optional[float] = None) -> Lease:
        """Hold the lock as one of its readers, waiting at most timeout."""
        return self.session._acquire(self.name, self.owner_key, True, timeout, True, self.max_readers)

    def try_read_lock(self) -> Lease:
        return self.session._acquire(self.name, self.owner_key, False, None, True, self.max_readers)

    def write_lock(self, timeout: Optional[float] = None) -> Lease:
        """Hold the lock as its one writer, waiting at most timeout."""
        return self.session._acquire(self.name, self.owner_key, True, timeout, False, self.max_readers)

    def try_write_lock(self) -> Lease:
        return self.session._acquire(self.name, self.owner_key, False, None, False, self.max_readers)
