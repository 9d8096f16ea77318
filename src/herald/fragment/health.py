"""Store health: a background checker per fragment store (gazette-facts §4.6).

Each checker probes its store the way the broker uses it — PUT a small object,
GET it back, LIST its directory, sign a GET URL, then remove it — and keeps the
outcome: healthy, or unhealthy with the last error. A healthy store is probed
again every `HEALTHY_INTERVAL_S`; an unhealthy one with backoff from
`RETRY_BACKOFF_S` up to `RETRY_MAX_S`, forever, so a store that comes back is
found healthy again by itself. Nothing is cached as a permanent failure.

Appends to a journal wait, bounded, for its first store to be healthy and fail
with FRAGMENT_STORE_UNHEALTHY otherwise; the persister wakes early on recovery::

    health = health_of(store)          # one checker per Store, per event loop
    await health.require_healthy()     # or raise HeraldError(FRAGMENT_STORE_UNHEALTHY)
    health.report_failure(err)         # an upload failed: unhealthy until a probe passes
    await health.wait_recovery(30.0)   # True once unhealthy → healthy happens

A probe that fails because this process is out of file descriptors says nothing
about the store: it leaves the store's state as it was, and appends waiting for a
store not yet known healthy get that 503 (RESOURCE_EXHAUSTED) at once rather than
a FRAGMENT_STORE_UNHEALTHY that would send an operator to the wrong system.

Probes run in an executor (they block on store I/O); everything else runs on the
event loop that first asked for the checker.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import secrets
import socket
import tempfile
import time
import weakref
from dataclasses import dataclass

from herald.fragment.fdpool import DescriptorsExhaustedError, descriptors_exhausted, is_out_of_descriptors
from herald.fragment.stores import Store
from herald.protocol.errors import HeraldError, Status

__all__ = [
    "APPEND_WAIT_S",
    "HEALTHY_INTERVAL_S",
    "PROBE_PREFIX",
    "PROBE_TIMEOUT_S",
    "RETRY_BACKOFF_S",
    "RETRY_MAX_S",
    "HealthState",
    "StoreHealth",
    "checker_of",
    "health_of",
    "probe",
]

log = logging.getLogger(__name__)

HEALTHY_INTERVAL_S = 15.0
RETRY_BACKOFF_S = 0.25
RETRY_MAX_S = 5.0
PROBE_TIMEOUT_S = 30.0
# How long an append waits for an unhealthy first store before failing (Gazette
# waits on ~6 consecutive failed checks; with our backoff that is a few seconds).
APPEND_WAIT_S = 6.0
PROBE_PREFIX = ".herald-health/"
_SIGN_TTL_S = 60.0


@dataclass(frozen=True, slots=True)
class HealthState:
    """One checker's latest outcome. ``checked`` is False until the first probe ends."""

    store: str
    healthy: bool
    checked: bool
    last_error: str
    consecutive_failures: int
    checks: int
    last_check_unix: float


def probe(store: Store, name: str) -> None:
    """PUT, GET, LIST, sign and remove ``PROBE_PREFIX + name`` (blocking).

    Raises whatever the store raises, or `OSError` when the store answers but
    wrongly (the object read back differs or is not listed).
    """
    path = PROBE_PREFIX + name
    payload = f"herald health probe {time.time():.6f}\n".encode()
    with tempfile.NamedTemporaryFile(prefix=".herald-probe-") as temp:
        temp.write(payload)
        temp.flush()
        store.put(path, temp.name)
    if store.get(path) != payload:
        raise OSError(f"store {store.url}: probe {path} read back different bytes")
    if name not in {relative for relative, _mod in store.list(PROBE_PREFIX)}:
        raise OSError(f"store {store.url}: probe {path} missing from its listing")
    if not store.sign_get(path, _SIGN_TTL_S):
        raise OSError(f"store {store.url}: signed an empty URL")
    store.remove(path)


class StoreHealth:
    """Background health of one store. Create with `health_of`; `stop()` to end it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self._healthy = False
        self._checked = False
        self._last_error = ""
        self._failures = 0
        self._checks = 0
        self._last_check_unix = 0.0
        self._changed = asyncio.Event()
        self._recovered = asyncio.Event()
        self._poked = asyncio.Event()
        self._probing = False
        self._probe_started = 0.0  # loop time the running probe started
        self._probe_failed = False
        self._local_error: HeraldError | None = None  # the last probe could not run here
        self._task: asyncio.Task | None = None

    # -- state ---------------------------------------------------------------------

    @property
    def is_healthy(self) -> bool:
        return self._healthy

    def statistics(self) -> HealthState:
        return HealthState(self.store.url, self._healthy, self._checked, self._last_error,
                           self._failures, self._checks, self._last_check_unix)

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start probing on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"store-health:{self.store.url}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def poke(self) -> None:
        """Probe now rather than at the next scheduled time. Cheap; calls while a
        probe runs coalesce into one more probe."""
        self._poked.set()

    def report_failure(self, error: BaseException | str) -> None:
        """The store just failed a real operation (an upload): count it as a failed
        check, so appends wait from now on, and probe again at once to find out
        whether it was a blip. Only a probe ever marks the store healthy again."""
        self._record(error if isinstance(error, str) else f"{type(error).__name__}: {error}",
                     probed=False)
        self.poke()

    # -- waiting -------------------------------------------------------------------

    async def wait_healthy(self, timeout_s: float) -> bool:
        """True as soon as the store is healthy; False if it is not within
        ``timeout_s`` (each failed probe in between is waited through)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self._healthy and self._local_error is None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return self._healthy
        return True

    async def require_healthy(self, timeout_s: float = APPEND_WAIT_S) -> None:
        """Return if the store is (or within ``timeout_s`` becomes) healthy; else
        raise FRAGMENT_STORE_UNHEALTHY with the last probe error."""
        if self._healthy or await self.wait_healthy(timeout_s):
            return
        if self._local_error is not None:
            raise self._local_error
        detail = self._last_error or self._unchecked_detail()
        raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                          f"fragment store {self.store.url} is unhealthy: {detail}", "journal")

    def _unchecked_detail(self) -> str:
        """Why a store never checked is not healthy: a first probe that has not
        answered (a store that accepts and never answers) says so and for how long,
        so an operator looks at the store, not at the broker."""
        if not self._probing:
            return "not yet checked"
        waited = asyncio.get_running_loop().time() - self._probe_started
        return f"not yet checked: its first probe has had no answer for {waited:.0f}s"

    async def check_now(self, timeout_s: float = PROBE_TIMEOUT_S * 2) -> HealthState:
        """Probe now and return the outcome of a probe that started after this call
        (one already running may predate a change, so it does not count)."""
        target = self._checks + (2 if self._probing else 1)
        self.poke()
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._checks < target:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no health check of {self.store.url} in {timeout_s:g}s")
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass
        return self.statistics()

    async def wait_recovery(self, timeout_s: float) -> bool:
        """True if a probe passes after a failed one within ``timeout_s``:
        a failed upload waits on this rather than a blind sleep, so it is retried
        as soon as the store is back, yet not in a tight loop while it is down."""
        try:
            await asyncio.wait_for(self._recovered.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    # -- probing -------------------------------------------------------------------

    async def _run(self) -> None:
        delay, local_before = RETRY_BACKOFF_S, False
        while True:
            self._poked.clear()
            error = await self._probe_once()
            if self._local_error is None:
                self._record(error)
                delay = HEALTHY_INTERVAL_S if error is None else (
                    RETRY_BACKOFF_S if self._failures == 1 else min(delay * 2, RETRY_MAX_S))
            else:  # not the store's fault: its state stands; waiting appends get the 503
                self._changed.set()
                self._changed = asyncio.Event()
                # Probe again soon (descriptors free up), backing off while they do not.
                delay = min(delay * 2, RETRY_MAX_S) if local_before else RETRY_BACKOFF_S
            local_before = self._local_error is not None
            try:
                await asyncio.wait_for(self._poked.wait(), delay)
            except TimeoutError:
                pass

    async def _probe_once(self) -> str | None:
        loop = asyncio.get_running_loop()
        self._probing, self._probe_started = True, loop.time()
        self._local_error = None
        try:
            await asyncio.wait_for(loop.run_in_executor(None, probe, self.store, self._name),
                                   PROBE_TIMEOUT_S)
        except TimeoutError:
            return f"probe timed out after {PROBE_TIMEOUT_S:g}s"
        except Exception as err:  # noqa: BLE001 - the checker must outlive any backend error
            if is_out_of_descriptors(err) or descriptors_exhausted():
                # tempfile, for one, reports EMFILE as "no usable temporary directory".
                self._local_error = DescriptorsExhaustedError(
                    f"probing fragment store {self.store.url}",
                    err if isinstance(err, OSError) else OSError(errno.EMFILE, os.strerror(errno.EMFILE)))
                log.warning("store=%s not probed: this broker is out of file descriptors", self.store.url)
                return None
            if not isinstance(err, OSError):
                log.warning("store=%s probe raised %s", self.store.url, type(err).__name__,
                            exc_info=True)
            return f"{type(err).__name__}: {err}"
        finally:
            self._probing = False
        return None

    def _record(self, error: str | None, probed: bool = True) -> None:
        was_healthy, outage = self._healthy, self._probe_failed
        if probed:
            self._checks += 1
            self._checked = True
            self._last_check_unix = time.time()
            self._probe_failed = error is not None
        self._healthy = error is None
        self._failures = 0 if error is None else self._failures + 1
        if error is not None:
            self._last_error = error
        if was_healthy != self._healthy:
            log.log(logging.INFO if self._healthy else logging.WARNING,
                    "store is %s", "healthy" if self._healthy else f"unhealthy: {error}",
                    extra={"store": self.store.url, "healthy": self._healthy})
        if self._healthy and outage:
            # A recovery is a passing probe after a failed one: a reported upload
            # failure that the next probe does not confirm wakes no retry early.
            self._recovered.set()
            self._recovered = asyncio.Event()
        self._changed.set()
        self._changed = asyncio.Event()


_CHECKERS: weakref.WeakKeyDictionary[Store, StoreHealth] = weakref.WeakKeyDictionary()


def health_of(store: Store) -> StoreHealth:
    """The running loop's checker for ``store``, created and started on first use.

    Keyed by the `Store` object: a broker opens one per URL, so every journal
    sharing a store shares its checker. A checker created on another (closed)
    loop is replaced.
    """
    loop = asyncio.get_running_loop()
    checker = _CHECKERS.get(store)
    if checker is None or checker._task is None or checker._task.get_loop() is not loop:
        checker = StoreHealth(store)
        _CHECKERS[store] = checker
    checker.start()
    return checker


def checker_of(store: Store) -> StoreHealth | None:
    """The checker ``health_of`` made for ``store``, if any, without creating one:
    for readers of health (metrics, ``/readyz``, the status page) that must not
    start probes of their own."""
    return _CHECKERS.get(store)
