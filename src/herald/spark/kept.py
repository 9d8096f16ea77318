"""A broker client kept for a Python worker's life, shared by its tasks.

PySpark reuses a worker process — a write task's, a read task's, the sink's
commit runner — for the next task or micro-batch. A client built per task (or,
worse, per journal slice of a packed read task) opens a TCP connection and pays
its first request's set-up each time: ~9 ms a slice, measured on the dedupe
source (issue 15), four slices a micro-batch over four journals. So the client
is kept by broker settings, with the pid that built it (a forked child must not
share its parent's sockets), and dropped after any failure: the retry then
picks a broker and connections afresh. A worker keeps one client per use
(``"write"``: the sink's tasks and commit runner; ``"read"``: the source's
tasks), so a failed read, which drops its client, never closes the one an idle
append service of the same worker holds.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Literal

from herald.client import BrokerClient
from herald.spark.options import HeraldOptions

__all__ = ["Use", "drop_worker_client", "kept_client", "worker_client"]

#: What a kept client is for: the sink's tasks and commit runner, or the source's tasks.
Use = Literal["read", "write"]

#: Clients by use and broker settings, with the pid that built them.
_clients: dict[tuple[object, ...], tuple[int, BrokerClient]] = {}


def worker_client(opts: HeraldOptions, use: Use = "write") -> BrokerClient:
    """A client for ``opts``' brokers kept for this process's life and ``use`` (see
    the module docstring); `drop_worker_client` forgets it after a failure."""
    key = (use, opts.brokers, opts.security)
    held = _clients.get(key)
    if held is None or held[0] != os.getpid():
        held = _clients[key] = (os.getpid(), opts.client())
    return held[1]


@contextlib.contextmanager
def kept_client(opts: HeraldOptions, use: Use = "write") -> Iterator[BrokerClient]:
    """`worker_client` for a block that drops it (`drop_worker_client`) if it raises."""
    try:
        yield worker_client(opts, use)
    except BaseException:
        drop_worker_client(opts, use)
        raise


def drop_worker_client(opts: HeraldOptions, use: Use = "write") -> None:
    """Close and forget the kept client: whatever failed a call (a broker gone,
    say), the next one starts with a fresh choice of broker and connections."""
    held = _clients.pop((use, opts.brokers, opts.security), None)
    if held is not None and held[0] == os.getpid():
        held[1].close()
