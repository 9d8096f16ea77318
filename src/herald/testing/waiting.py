"""Waits with a deadline, for effects a broker has no event for (uploads, routes).

Each re-checks its condition every ``PAUSE_S`` and fails loudly at the deadline
with what it was waiting for: never a bare sleep that hopes long enough.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from herald.client import BrokerClient, FragmentInfo

__all__ = ["DEADLINE_S", "wait_for_route", "wait_persisted", "wait_until"]

DEADLINE_S = 30.0
PAUSE_S = 0.05
T = TypeVar("T")


def wait_until(predicate: Callable[[], T], what: str, deadline_s: float = DEADLINE_S) -> T:
    """``predicate()``'s first truthy value; AssertionError naming ``what`` at the deadline."""
    pause = threading.Event()
    end = time.monotonic() + deadline_s
    while not (value := predicate()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        pause.wait(PAUSE_S)
    return value


def wait_persisted(client: BrokerClient, journal: str, count: int = 1, through: int = 0,
                   deadline_s: float = DEADLINE_S) -> list[FragmentInfo]:
    """The journal's fragments (signed URLs included) once at least ``count`` are
    persisted and, with ``through``, every byte below it is in a persisted one."""
    def persisted() -> list[FragmentInfo] | None:
        infos = client.fragments(journal, signature_ttl_s=60)
        done = [i for i in infos if i.fragment.is_persisted]
        covered = max((i.fragment.end for i in done), default=0)
        return infos if len(done) >= count and covered >= through else None
    return wait_until(persisted, f"{journal}: {count} persisted fragments through {through}", deadline_s)


def wait_for_route(client: BrokerClient, journal: str, size: int, deadline_s: float = DEADLINE_S) -> dict:
    """The journal's route once it has a primary and ``size`` members (the allocator converged)."""
    def converged() -> dict | None:
        infos = client.list(f"name={journal}")
        route = infos[0].route if infos else {}
        return route if route.get("primary") == 0 and len(route.get("members", [])) == size else None
    return wait_until(converged, f"route of {journal} with {size} members", deadline_s)
