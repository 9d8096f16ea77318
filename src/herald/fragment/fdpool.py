"""A broker-wide budget of open spool descriptors, closed least-recently-used.

A broker serves far more journals than it may hold descriptors (the common soft
limit is 1,024; a spool needs two). So a spool opens its files when it is first
written, and `DescriptorPool` keeps at most ``budget_fds`` of them open across
all spools: when a spool needs its descriptors and the budget is spent, the
least recently used *idle* spools are closed. A spool is pinned for as long as a
write, sync or commit uses its descriptors (these run on executor threads), and a
pinned spool is never closed under it. Holders set their descriptor numbers to -1
before closing them, so a closed number the kernel hands out again can never be
written through a stale copy.

Running out anyway (EMFILE: sockets, reads, other processes' share of ENFILE) is
answered per request with `DescriptorsExhaustedError` (503) after shedding every
idle descriptor and trying once more; it never breaks a journal or a restart.

    pool = DescriptorPool(budget_fds=256)
    with pool.pinned(spool):      # opens the spool's files if closed; blocking
        os.pwrite(spool.fd, ...)

Thread-safe: one lock guards the pool, held only for opens and closes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from herald.protocol.errors import HeraldError, Status

__all__ = ["DescriptorPool", "DescriptorsExhaustedError", "PooledFiles", "default_pool",
           "descriptors_exhausted", "is_out_of_descriptors", "retry_out_of_descriptors"]

log = logging.getLogger(__name__)

MAX_BUDGET_FDS = 4096
T = TypeVar("T")


class DescriptorsExhaustedError(HeraldError):
    """The process (or system) is out of file descriptors: this request fails,
    nothing is left half-done, and a retry may succeed once descriptors free up."""

    def __init__(self, what: str, err: OSError):
        super().__init__(Status.RESOURCE_EXHAUSTED,
                         f"out of file descriptors while {what} ({err.strerror}); retry later, or "
                         "raise the broker's open-file limit (ulimit -n)")


class PooledFiles(Protocol):
    """What the pool manages: a holder that can open and close its descriptors."""

    def open_descriptors(self) -> int:
        """Open the holder's files; return how many descriptors that took. Blocking."""

    def close_descriptors(self) -> None:
        """Close them (numbers set to -1 first); idempotent."""


def is_out_of_descriptors(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in (errno.EMFILE, errno.ENFILE)


def descriptors_exhausted() -> bool:
    """Whether this process cannot open one more descriptor right now: for errors
    that lost their EMFILE on the way (tempfile reports "no usable temporary
    directory"). Blocking, but only an open and close of /dev/null."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
    except OSError as err:
        return is_out_of_descriptors(err)
    return False


def budget_from_limit() -> int:
    """A quarter of the soft RLIMIT_NOFILE (the rest is for sockets, reads and
    stores), at most ``MAX_BUDGET_FDS``, at least 8."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_BUDGET_FDS
    return max(8, min(soft // 4, MAX_BUDGET_FDS))


class DescriptorPool:
    """Open holders in least-recently-used order, each with its pin count."""

    def __init__(self, budget_fds: int | None = None) -> None:
        self._budget_fds = budget_fds
        self._lock = threading.Lock()
        self._open: OrderedDict[PooledFiles, list[int]] = OrderedDict()  # holder -> [fds, pins]
        self._open_fds = 0
        self.evictions = 0

    @property
    def budget_fds(self) -> int:
        # Read lazily: the broker raises its soft limit at start, after import.
        if self._budget_fds is None:
            self._budget_fds = budget_from_limit()
        return self._budget_fds

    @contextlib.contextmanager
    def pinned(self, holder: PooledFiles) -> Iterator[None]:
        """Hold ``holder``'s descriptors open for the block, opening them if closed.
        Blocking; raises DescriptorsExhaustedError if they cannot be opened."""
        self.pin(holder)
        try:
            yield
        finally:
            self.unpin(holder)

    def pin_if_open(self, holder: PooledFiles) -> bool:
        """Pin ``holder`` (as `pinned` does) only if its descriptors are open now,
        so never blocking on open(2): a caller on the event loop uses the open files
        at once, or goes to a thread. `unpin` releases it."""
        with self._lock:
            entry = self._open.get(holder)
            if entry is None:
                return False
            entry[1] += 1
            self._open.move_to_end(holder)
            return True

    def forget(self, holder: PooledFiles) -> None:
        """Drop ``holder`` (it closes its own descriptors); idempotent."""
        with self._lock:
            entry = self._open.pop(holder, None)
            if entry is not None:
                self._open_fds -= entry[0]

    def shed_idle(self) -> int:
        """Close every idle holder's descriptors (on EMFILE); returns how many holders."""
        with self._lock:
            return self._evict(lambda: True)

    def statistics(self) -> dict[str, int]:
        with self._lock:
            pinned = sum(1 for _fds, pins in self._open.values() if pins)
            return {"open_fds": self._open_fds, "open_holders": len(self._open), "pinned_holders": pinned,
                    "budget_fds": self.budget_fds, "evictions": self.evictions}

    def pin(self, holder: PooledFiles) -> None:
        """`pinned` without the context manager, for a holder pinned across calls
        (a group's round); `unpin` releases it. Blocking, as `pinned`."""
        with self._lock:
            entry = self._open.get(holder)
            if entry is None:
                self._evict(lambda: self._open_fds >= self.budget_fds)
                entry = self._open[holder] = [self._open_holder(holder), 0]
                self._open_fds += entry[0]
            entry[1] += 1
            self._open.move_to_end(holder)

    def unpin(self, holder: PooledFiles) -> None:
        """Release a pin taken by `pin` or `pin_if_open`."""
        with self._lock:
            entry = self._open.get(holder)
            if entry is not None:
                entry[1] -= 1
            if self._open_fds > self.budget_fds:  # else no copy of the holders per unpin
                self._evict(lambda: self._open_fds > self.budget_fds)

    def pin_many(self, holders: Sequence[PooledFiles]) -> list[OSError | HeraldError | None]:
        """`pin` each of ``holders`` under one hold of the lock (a sync round pins a
        spool per journal: at 16 journals, a lock round trip each cost more than the
        pins); per holder, None or the error that kept it from opening. Blocking."""
        errors: list[OSError | HeraldError | None] = []
        with self._lock:
            for holder in holders:
                entry = self._open.get(holder)
                if entry is None:
                    try:
                        self._evict(lambda: self._open_fds >= self.budget_fds)
                        entry = self._open[holder] = [self._open_holder(holder), 0]
                    except (OSError, HeraldError) as err:
                        errors.append(err)
                        continue
                    self._open_fds += entry[0]
                entry[1] += 1
                self._open.move_to_end(holder)
                errors.append(None)
        return errors

    def unpin_many(self, holders: Iterable[PooledFiles]) -> None:
        """`unpin` each of ``holders``, under one hold of the lock."""
        with self._lock:
            for holder in holders:
                entry = self._open.get(holder)
                if entry is not None:
                    entry[1] -= 1
            if self._open_fds > self.budget_fds:  # else no copy of the holders per unpin
                self._evict(lambda: self._open_fds > self.budget_fds)

    def _open_holder(self, holder: PooledFiles) -> int:
        """Open under the lock; on EMFILE close every idle holder and try once more."""
        try:
            return holder.open_descriptors()
        except OSError as err:
            if not is_out_of_descriptors(err):
                raise
            shed = self._evict(lambda: True)
            log.warning("out of descriptors opening a spool: closed %d idle spools and retrying", shed)
            try:
                return holder.open_descriptors()
            except OSError as again:
                if is_out_of_descriptors(again):
                    raise DescriptorsExhaustedError("opening a spool", again) from None
                raise

    def _evict(self, over: Callable[[], bool]) -> int:
        """Close idle holders, least recently used first, while ``over()``. Lock held."""
        closed = 0
        for holder in list(self._open):
            if not over():
                break
            fds, pins = self._open[holder]
            if pins:
                continue
            del self._open[holder]
            self._open_fds -= fds
            holder.close_descriptors()
            closed += 1
        self.evictions += closed
        return closed


def retry_out_of_descriptors(what: str, fn: Callable[[], T], pool: DescriptorPool | None = None) -> T:
    """``fn()``; on EMFILE/ENFILE shed the pool's idle descriptors and call it once
    more, then raise DescriptorsExhaustedError naming ``what``. For short-lived
    descriptors outside the pool (creating a spool, a local read). Blocking."""
    try:
        return fn()
    except OSError as err:
        if not is_out_of_descriptors(err):
            raise
    (pool or default_pool()).shed_idle()
    try:
        return fn()
    except OSError as err:
        if is_out_of_descriptors(err):
            raise DescriptorsExhaustedError(what, err) from None
        raise


_DEFAULT: DescriptorPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> DescriptorPool:
    """The process-wide pool every spool uses (its budget read from the limit in
    force when it is first used)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = DescriptorPool()
        return _DEFAULT
