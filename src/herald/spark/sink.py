"""The exactly-once sink: a micro-batch is a Gazette consumer transaction [I-SINK-1].

Commit order (each step durable before the next):

1. Tasks (executors, `write`: `herald.spark.sink_tasks`) publish every row as a
   CONTINUE_TXN message under a fresh ProducerID per task attempt and return the
   attempt's ACK intents. A failed or abandoned attempt's messages are never
   acknowledged, so read-committed readers never see them.
2. The driver's ``commit(messages, batchId)`` first *recovers* if this is a new
   driver incarnation (its token differs from the fence record): it re-appends
   the last recorded intents — delivering a batch whose ACKs a crash may have
   cut short — with ``union_registers <fence>=<token>`` on every journal the sink
   writes, which fences any zombie driver (its later ACK appends check the old
   token and fail with REGISTER_MISMATCH, writing nothing [I-REG-1]).
3. It records the batch's intents at ``intents/<batchId>`` (create-if-absent:
   of two racing drivers, one record wins and both append *its* intents).
4. Only then it appends the intents, checking the fence register.

A batch whose record exists (Spark replays the last batch after a crash, and
calls ``commit`` again) publishes nothing new: its recorded intents are
re-appended, which readers that saw them already treat as a no-op rollback.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from herald.client import BrokerClient, JournalInfo
from herald.client.transient import retry_transient
from herald.message.framing import framing_for_labels
from herald.message.intents import AckIntent
from herald.message.uuid import ACK_TXN, Clock, ProducerID, build_uuid
from herald.protocol.errors import HeraldError, Status
from herald.protocol.labels import LabelSet
from herald.spark.kept import kept_client
from herald.spark.options import HeraldOptions
from herald.spark.state import atomic_write
from herald.spark.worker_gc import freeze_imports

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BatchWriter", "FencedError", "SinkCommit", "SinkLog", "StreamWriter", "commit_batch", "driver_token",
           "plan_journals"]

log = logging.getLogger(__name__)
#: How long the driver retries an ACK append through transient broker errors (a
#: fail-over's leases and re-assignment are seconds) before the batch fails.
COMMIT_DEADLINE_S = 60.0
MAX_PARALLEL_ACKS = 16  # output journals whose ACKs are appended at once
#: This process's pool for appends to every journal at once (`_on_every_journal`),
#: with the pid that built it: PySpark reuses a worker — the commit runner, a write
#: task's — for the next micro-batch, which then neither starts a thread nor opens
#: a connection per output journal again (16 of each per commit with 16 journals;
#: its client: `herald.spark.kept`).
_pool: tuple[int, ThreadPoolExecutor] | None = None


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one successful task attempt tells the driver: its ACK intents."""

    intents: list[tuple[str, bytes]] = field(default_factory=list)
    rows: int = 0
    producer: str = ""


# -- driver --------------------------------------------------------------------------------


def driver_token() -> str:
    """An id of this driver incarnation: the commit runs in a Python worker whose
    parent (PySpark's daemon) lives as long as the driver JVM, so host + parent pid
    + parent start time changes exactly when the driver restarts."""
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/stat") as f:
            started = f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = os.urandom(8).hex()  # Unknown: fence on every commit (correct, just more appends).
    return hashlib.sha1(f"{socket.gethostname()}:{ppid}:{started}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Record:
    batch_id: int
    token: str
    intents: tuple[AckIntent, ...]

    def to_json(self) -> bytes:
        return json.dumps({"batch_id": self.batch_id, "token": self.token,
                           "intents": [{"journal": i.journal, "data": base64.b64encode(i.data).decode()}
                                       for i in self.intents]}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Record:
        doc = json.loads(data)
        return cls(int(doc["batch_id"]), str(doc["token"]),
                   tuple(AckIntent(i["journal"], base64.b64decode(i["data"])) for i in doc["intents"]))


class SinkLog:
    """The sink's durable records under ``<location>/herald/sink/``: one intent
    record per batch (create-if-absent) and the fence (token + fenced journals)."""

    KEEP = 3

    def __init__(self, location: str) -> None:
        self.root = Path(location) / "herald" / "sink"

    def _record_path(self, batch_id: int) -> Path:
        return self.root / "intents" / f"{batch_id:020d}.json"

    def last(self) -> Record | None:
        directory = self.root / "intents"
        names = sorted(p.name for p in directory.glob("*.json")) if directory.is_dir() else []
        return Record.from_json((directory / names[-1]).read_bytes()) if names else None

    def record(self, rec: Record) -> Record:
        """Record ``rec`` unless its batch is recorded already; returns the winner."""
        path = self._record_path(rec.batch_id)
        if atomic_write(path, rec.to_json(), exclusive=True):
            return rec
        return Record.from_json(path.read_bytes())

    def prune(self, below_batch: int) -> None:
        for path in (self.root / "intents").glob("*.json"):
            if int(path.stem) < below_batch - self.KEEP:
                path.unlink(missing_ok=True)

    def fence(self) -> tuple[str, set[str]]:
        try:
            doc = json.loads((self.root / "fence.json").read_bytes())
            return doc["token"], set(doc["journals"])
        except FileNotFoundError:
            return "", set()

    def has_recovered(self, token: str) -> bool:
        return (self.root / "tokens" / token).exists()

    def mark_recovered(self, token: str) -> None:
        """Remember that incarnation ``token`` ran recovery: if it is ever fenced
        afterwards, it is a zombie and must stop rather than recover again."""
        atomic_write(self.root / "tokens" / token, b"")

    def set_fence(self, token: str, journals: set[str]) -> None:
        atomic_write(self.root / "fence.json", json.dumps({"token": token, "journals": sorted(journals)}).encode())


def _grouped(intents: Iterable[AckIntent]) -> dict[str, bytes]:
    """One append per journal: ACKs of all task producers together, atomically."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for i in intents:
        out[i.journal].append(i.data)
    return {j: b"".join(chunks) for j, chunks in out.items()}


def _fence_ack(client: BrokerClient, journal: str, token: str, opts: HeraldOptions,
               labels: LabelSet | None = None) -> bytes:
    """An ACK of a producer that publishes nothing else: a harmless byte to carry
    a register change to a journal without recorded intents. ``labels``: the
    journal's, from a listing the caller made (else listed here: a round trip)."""
    if labels is None:
        infos = client.list(f"name={journal}")
        labels = infos[0].spec.labels if infos else LabelSet()
    framing = framing_for_labels(labels, opts.uuid_field)
    producer = ProducerID.new(bytes.fromhex(token)[:6])
    return framing.encode(framing.ack_body(), build_uuid(producer, Clock.from_unix_ns(time.time_ns()).tick(), ACK_TXN))


def _fence(client: BrokerClient, opts: HeraldOptions, token: str, journals: set[str] | dict[str, LabelSet],
           last: Record | None) -> set[str]:
    """Put ``<register>=<token>`` on ``journals`` (names, or names → labels as just
    listed, which spares a fence ACK its own listing), re-appending the last
    recorded intents where there are some (Gazette's recovery), a fence ACK elsewhere."""
    register = f"{opts.fence_register}={token}"
    recorded = _grouped(last.intents) if last else {}
    labels = journals if isinstance(journals, dict) else {}

    def fence(journal: str) -> None:
        data = recorded.get(journal) or _fence_ack(client, journal, token, opts, labels.get(journal))
        retry_transient(lambda: client.append(journal, data, union_registers=register),
                        COMMIT_DEADLINE_S, f"sink fence on {journal}")

    _on_every_journal(fence, sorted(set(journals) | set(recorded)))  # All must succeed before the fence is recorded.
    return set(journals) | set(recorded)


class FencedError(HeraldError):
    """Another driver took over this sink (a newer incarnation fenced it)."""

    def __init__(self, message: str) -> None:
        super().__init__(Status.REGISTER_MISMATCH, message, "fenceRegister")


def commit_batch(opts: HeraldOptions, token: str, messages: Iterable[SinkCommit | None], batch_id: int,
                 client: BrokerClient | None = None) -> Record:
    """Driver: the sink's commit protocol (module docstring), for one batch.
    Raises FencedError (writing nothing) if a newer driver has taken over.
    ``client``: the caller's (kept open); None: one of its own, closed after."""
    sink_log = SinkLog(opts.state_location)
    with opts.client() if client is None else contextlib.nullcontext(client) as client:
        last = sink_log.last()
        fence_token, fenced = sink_log.fence()
        if fence_token != token:
            if sink_log.has_recovered(token):
                raise FencedError(f"sink token {token} was fenced by {fence_token}: another driver took over")
            selected = {i.name: i.spec.labels for i in client.list(opts.selector)}
            fenced = _fence(client, opts, token, selected, last)
            sink_log.set_fence(token, fenced)
            sink_log.mark_recovered(token)
            log.info("sink recovered token=%s last_batch=%s fenced=%d journals", token,
                     last.batch_id if last else None, len(fenced))
        if last is not None and batch_id < last.batch_id:
            return last  # Long committed; nothing to do.
        intents = tuple(AckIntent(j, d) for m in messages if m is not None for j, d in m.intents)
        if not intents and (last is None or batch_id > last.batch_id):
            # Nothing published and nothing recorded at this batch: no record
            # (two fsyncs) and no appends. Recovery still finds the last batch
            # that published, whose ACKs are the ones a crash may have cut short.
            return Record(batch_id, token, ())
        rec = sink_log.record(Record(batch_id, token, intents))
        grouped = _grouped(rec.intents)
        new = set(grouped) - fenced
        if new:  # Journals that joined the selector since recovery.
            fenced = _fence(client, opts, token, new, None) | fenced
            sink_log.set_fence(token, fenced)
        _append_acks(client, grouped, f"{opts.fence_register}={token}")
        sink_log.prune(batch_id)
        return rec


def _append_acks(client: BrokerClient, grouped: dict[str, bytes], fence: str | None) -> None:
    """Append each journal's ACK intents, checking the fence (if any), all journals at once:
    the appends are independent (readers commit each journal's transaction on its
    own ACK), so a batch's commit costs one broker round trip, not one per output
    journal. Through a fail-over (a peerset briefly short of its replication answers
    503) each is retried: repeating ACK intents is what a replay does, and readers
    ignore it. The first failure (a 412 from a newer driver's fence) is raised."""

    def append(journal: str) -> None:
        retry_transient(lambda: client.append(journal, grouped[journal], check_registers=fence),
                        COMMIT_DEADLINE_S, f"sink commit to {journal}")

    _on_every_journal(append, list(grouped))


def _on_every_journal(work: Callable[[str], None], journals: list[str]) -> None:
    """``work(journal)`` for every journal at once (a thread each, up to
    MAX_PARALLEL_ACKS, from this process's pool): independent broker round trips,
    so a commit or a recovery costs one, not one per journal. Returns when all
    succeeded; raises the first failure once every call has ended."""
    global _pool
    if len(journals) <= 1:
        for journal in journals:
            work(journal)
        return
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(MAX_PARALLEL_ACKS, "herald-sink-ack"))
    futures = [_pool[1].submit(work, journal) for journal in journals]
    wait(futures)  # all of them, even after a failure: none still appending once this returns
    for done in futures:
        done.result()


def plan_journals(opts: HeraldOptions) -> tuple[JournalInfo, ...]:
    """Planner (driver, once per job or micro-batch): the journals the selector
    matches, listed once and pickled into the writer, so its tasks skip a broker
    round trip each. A journal that joins the selector later is written from the
    next micro-batch (or the next batch job) on; the commit needs no list of its
    own (it acknowledges, and fences, the journals the tasks' intents name).
    Retried through transient broker errors: Spark retries a failed task, but a
    failed planner fails the whole batch."""
    with kept_client(opts) as client:
        return retry_transient(lambda: tuple(client.list(opts.selector)), COMMIT_DEADLINE_S,
                               "list the output journals")


class StreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("herald")``: tasks publish, the driver commits.

    Each micro-batch builds this writer twice: in the writer's planner, which
    pickles it for the tasks, and in the sink's commit runner, which only calls
    `commit`. Both are built with the output journals listed (`plan_journals`, by
    ``HeraldDataSource.streamWriter``): the commit runner's listing is one List
    round trip it does not need, but pickling must stay a pure copy of the state
    — it listed the journals here once, a broker call that Spark, or anyone
    pickling the writer, could not see, retry or bound."""

    def __init__(self, opts: HeraldOptions, schema: object = None,
                 journals: tuple[JournalInfo, ...] | None = None) -> None:
        self.opts = opts
        self.journals = journals  # the planner's listing (plan_journals); None: each task lists

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        """Executor, once per task attempt."""
        from herald.spark.sink_tasks import publish_rows, task_seed

        return publish_rows(self.opts, iterator, task_seed(), self.journals)

    def commit(self, messages: list[SinkCommit | None], batchId: int) -> None:
        """Driver, once per batch (again for a replayed batch): see module doc."""
        freeze_imports()  # the commit runner is a reused worker, collected after each commit (worker_gc)
        with kept_client(self.opts) as client:
            commit_batch(self.opts, driver_token(), messages, batchId, client)

    def abort(self, messages: list[SinkCommit | None], batchId: int) -> None:
        """Driver: nothing to undo — unacknowledged messages never commit."""
        log.warning("sink batch %d aborted; its messages stay uncommitted", batchId)


class BatchWriter(DataSourceArrowWriter):
    """``write.format("herald")``: one transaction for the whole job — each
    journal receives all its ACKs in one append after every task succeeded."""

    def __init__(self, opts: HeraldOptions, schema: object = None,
                 journals: tuple[JournalInfo, ...] | None = None) -> None:
        self.opts = opts
        self.journals = journals  # as StreamWriter's

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        from herald.spark.sink_tasks import publish_rows, task_seed

        return publish_rows(self.opts, iterator, task_seed(), self.journals)

    def commit(self, messages: list[SinkCommit | None]) -> None:
        """Driver: every journal's ACKs at once (repeating one is harmless)."""
        freeze_imports()
        intents = (AckIntent(j, d) for m in messages if m is not None for j, d in m.intents)
        grouped = _grouped(intents)
        if grouped:
            with self.opts.client() as client:
                _append_acks(client, grouped, None)

    def abort(self, messages: list[SinkCommit | None]) -> None:
        log.warning("herald batch write aborted; nothing was acknowledged")
