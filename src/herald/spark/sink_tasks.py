"""The exactly-once sink's task side: rows → CONTINUE_TXN messages (executors).

Step 1 of the commit order in `herald.spark.sink`: each task attempt publishes
its rows under a fresh producer and returns the ACK intents that would commit
them; the driver records and appends those. Apart from the commit side because
this side needs numpy, pyarrow and the Publisher, which the commit runner —
a fresh Python process per query — must not pay for.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from herald.client import AppendService, JournalInfo, Publisher
from herald.protocol.errors import ValidationError
from herald.spark.kept import drop_worker_client, worker_client
from herald.spark.options import HeraldOptions
from herald.spark.publishing import publish_bulk
from herald.spark.sink import SinkCommit
from herald.spark.worker_gc import freeze_imports

__all__ = ["publish_rows", "task_seed"]

#: This worker's append service, with the settings and output journals it was
#: built for: kept from task to task (PySpark reuses a Python worker for the next
#: task), so a task does not start a sender thread per output journal again, nor
#: open connections (its client is `worker_client`'s). One at a time: another
#: query's journals replace it, so a worker's idle sender threads stay one job's.
_held: tuple[int, tuple[object, ...], AppendService] | None = None
#: How long a journal's bytes may wait for more in the task's append service: in
#: effect until ``appendBytes`` of them are there or the task ends (its flush).
#: The service's default (5 ms) sent every Arrow batch's share of every journal
#: as an append of its own: 32 appends a task over 16 journals where 16 do, each
#: ≈ 1 ms of client and 1–2 ms of broker CPU. Output of ``appendBytes`` and more
#: is still in flight while the task frames the next batch.
TASK_LINGER_S = 60.0


def _strip_uuid(prefix: bytes, body: bytes) -> bytes:
    """Drop a UUID the body already carries (a journal → journal copy), so the
    new message has exactly one: the one stamped here."""
    if body.startswith(prefix):
        rest = body[len(prefix) + 36:]
        if rest.startswith(b'",'):
            return b"{" + rest[2:]
        if rest.startswith(b'"}'):
            return b"{}"
    return body


def _as_bytes(column: pa.Array | None, n: int) -> list[bytes | None]:
    if column is None:
        return [None] * n
    values = column.to_pylist()
    return [v.encode() if isinstance(v, str) else (None if v is None else bytes(v)) for v in values]


def publish_rows(opts: HeraldOptions, batches: Iterable[pa.RecordBatch], seed: int,
                 journals: Sequence[JournalInfo] | None = None) -> SinkCommit:
    """Executor: publish each row's ``value`` (mapped by ``key``, if any; a random
    journal without one) as a CONTINUE_TXN message of a fresh producer, through a
    `Publisher` on an `AppendService` (appends pipelined per journal, the next batch
    of bytes in flight while the previous one commits); returns its ACK intents.
    Every append must have succeeded before the intents are returned.

    A task with no rows (a shuffle partition the batch left empty; every task of
    an idle micro-batch) returns an empty commit without touching the brokers:
    no producer, nothing to acknowledge. ``journals``: the planner's listing
    (`herald.spark.sink.plan_journals`), or None to list here."""
    freeze_imports()
    remaining = (batch for batch in batches if batch.num_rows)
    first = next(remaining, None)
    if first is None:
        return SinkCommit()
    prefix = b'{"' + opts.uuid_field.encode() + b'":"'
    rows, futures = 0, set()
    if journals is None:
        with opts.client() as client:
            journals = tuple(client.list(opts.selector))
    if not journals:
        raise ValidationError("selector", f"{opts.selector!r} matches no journals to write to")
    service = _service(opts, journals)
    try:
        publisher = Publisher(service, journals, mapping=opts.mapping, rnd=random.Random(seed),
                              uuid_field=opts.uuid_field)
        rng = np.random.default_rng(seed)
        for batch in itertools.chain((first,), remaining):
            bulk = publish_bulk(publisher, batch, opts.uuid_field, opts.mapping, rng)
            if bulk is not None:
                futures |= bulk
                rows += batch.num_rows
                continue
            names = batch.schema.names
            values = _as_bytes(batch.column(names.index("value")), batch.num_rows)
            keys = _as_bytes(batch.column(names.index("key")) if "key" in names else None, batch.num_rows)
            futures |= publisher.publish_uncommitted_batch(
                (key, _strip_uuid(prefix, value or b"")) for key, value in zip(keys, values))
            rows += batch.num_rows
        publisher.flush()
        for future in futures:
            future.result()  # a failed append fails the task: its intents are never recorded
        intents = [(i.journal, i.data) for i in publisher.build_ack_intents()]
    except BaseException:
        _drop_service()
        drop_worker_client(opts)  # whatever failed the task (a broker gone?), its retry starts afresh
        raise
    return SinkCommit(intents, rows, publisher.producer.hex())


def _service(opts: HeraldOptions, journals: Sequence[JournalInfo]) -> AppendService:
    """This worker's append service for ``opts`` and ``journals`` (built on first
    use, or when they change: the previous one is idle, a task's appends being all
    durable or failed when it returns). Its sender threads append over a plain
    connection per journal where the brokers are ``http://``
    (``connection_per_journal``: `herald.client.plain_write`), so the Arrow
    pieces `publish_bulk` hands over go to the socket uncopied; its client, for
    anything else, is then a plain one of its own (no httpx import in a fresh
    worker), else the worker's kept client."""
    global _held
    key = (opts.brokers, opts.security, opts.append_bytes, tuple(info.name for info in journals))
    if _held is not None and _held[0] == os.getpid() and _held[1] == key:
        return _held[2]
    _drop_service()
    client = opts.client(plain=True) if _plain(opts) else worker_client(opts)
    _held = (os.getpid(), key, AppendService(client, max_batch_bytes=opts.append_bytes, linger_s=TASK_LINGER_S,
                                             connection_per_journal=True))
    return _held[2]


def _plain(opts: HeraldOptions) -> bool:
    """Every broker is ``http://``: the service needs no httpx client."""
    return all(url.lower().startswith("http://") for url in opts.brokers)


def _drop_service() -> None:
    """Stop and forget this worker's append service (its sender threads end, and
    their connections are closed)."""
    global _held
    held, _held = _held, None
    if held is not None and held[0] == os.getpid():
        held[2].close(0)
        if held[2].client.plain:  # the service's own (worker_client's is kept)
            held[2].client.close()


def task_seed() -> int:
    """This task attempt's id (a fresh producer and mapping draw per attempt)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx else int.from_bytes(os.urandom(4), "big")
