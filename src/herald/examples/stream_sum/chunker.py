"""Chunkers: publish interleaved chunks of many random files, and expect their sums.

A chunker keeps ``files`` files open at once and publishes, at ``rate`` chunks
per second, the next chunk of a randomly chosen open one — so the chunks of
many files interleave in every journal, as in Gazette's stream-sum. Chunks are
committed messages keyed by file id (modulo mapping: a file's chunks map to
one journal, in order). A file has 1..``max_chunks`` chunks of random bytes;
when its chunks are out, the chunker registers the expected digest with the
`Verifier`, publishes the end chunk, and opens a new file (until ``duration_s``
is over; then it only finishes the open ones).

File ids are ``<nonce>c<chunker>-<n>``: the run's nonce keeps runs apart on a
long-lived broker.

    with BrokerClient(url) as client:
        verifier = Verifier(client, ["stream-sum/sums/part-000"], nonce).start()
        run_chunker(client, ChunkerSettings(duration_s=10), 0, nonce, verifier)
        verifier.wait_all()
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from herald.client import AppendService, BrokerClient
from herald.client.publisher import Publisher
from herald.examples.stream_sum.digest import file_digest
from herald.examples.stream_sum.messages import chunk_body
from herald.examples.stream_sum.summer import CHUNKS
from herald.examples.stream_sum.verify import Verifier
from herald.protocol.errors import ValidationError

__all__ = ["ChunkerSettings", "run_chunker"]


@dataclass(frozen=True, slots=True)
class ChunkerSettings:
    """One chunker's work (every chunker of a run has the same)."""

    files: int = 4
    duration_s: float = 10.0
    rate: float = 20.0
    max_chunks: int = 6
    max_chunk_bytes: int = 512
    chunks: str = CHUNKS
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("files", "max_chunks", "max_chunk_bytes"):
            if getattr(self, name) < 1:
                raise ValidationError(name, f"must be >= 1 ({getattr(self, name)})")
        if self.duration_s < 0:
            raise ValidationError("duration", f"must be >= 0 ({self.duration_s})")
        if self.rate < 0:
            raise ValidationError("rate", f"must be >= 0, 0 = as fast as possible ({self.rate})")


@dataclass(slots=True)
class _OpenFile:
    file_id: str
    chunks: list[bytes]
    sent: int = 0


@dataclass(slots=True)
class _Chunker:
    settings: ChunkerSettings
    index: int
    nonce: str
    verifier: Verifier
    publisher: Publisher
    rnd: random.Random
    opened: int = 0
    open_files: list[_OpenFile] = field(default_factory=list)

    def new_file(self) -> _OpenFile:
        s, rnd = self.settings, self.rnd
        chunks = [rnd.randbytes(rnd.randint(1, s.max_chunk_bytes)) for _ in range(rnd.randint(1, s.max_chunks))]
        self.opened += 1
        return _OpenFile(f"{self.nonce}c{self.index}-{self.opened:06d}", chunks)

    def publish_next(self, f: _OpenFile) -> bool:
        """Publish ``f``'s next chunk (its end after the last); True once it ended."""
        key = f.file_id.encode()
        if f.sent < len(f.chunks):
            self._watch(f.file_id, self.publisher.publish_committed(key, chunk_body(f.file_id, f.sent, f.chunks[f.sent],
                                                                                     False)), end=False)
            f.sent += 1
            return False
        self.verifier.expect(f.file_id, file_digest(f.file_id, f.chunks), len(f.chunks))
        self._watch(f.file_id, self.publisher.publish_committed(key, chunk_body(f.file_id, f.sent, b"", True)),
                    end=True)
        return True

    def _watch(self, file_id: str, future: Future[object], end: bool) -> None:
        def done(fut: Future[object]) -> None:
            if fut.exception() is not None:
                self.verifier.violation(f"{file_id}: publishing a chunk failed: {fut.exception()!r}")
            elif end:
                self.verifier.acked(file_id)
        future.add_done_callback(done)


def run_chunker(client: BrokerClient, settings: ChunkerSettings, index: int, nonce: str, verifier: Verifier,
                stop: threading.Event | None = None) -> int:
    """Publish for ``duration_s`` (or until ``stop``), then finish the open files;
    blocks until every chunk is durable. Returns how many files it ended."""
    rnd = random.Random(None if settings.seed is None else settings.seed * 1000 + index)
    with AppendService(client, linger_s=0.002) as service:
        publisher = Publisher(service, client.list(settings.chunks), mapping="modulo", rnd=rnd)
        if not publisher.partitions()[0]:
            raise ValidationError("chunks", f"{settings.chunks!r} matches no journals")
        chunker = _Chunker(settings, index, nonce, verifier, publisher, rnd)
        chunker.open_files = [chunker.new_file() for _ in range(settings.files)]
        started = time.monotonic()
        pause = threading.Event()
        sent = ended = 0
        while chunker.open_files:
            if settings.rate:
                pause.wait(max(0.0, started + sent / settings.rate - time.monotonic()))  # pacing, not a sync
            f = rnd.choice(chunker.open_files)
            sent += 1
            if chunker.publish_next(f):
                ended += 1
                chunker.open_files.remove(f)
                if time.monotonic() - started < settings.duration_s and not (stop and stop.is_set()):
                    chunker.open_files.append(chunker.new_file())
        publisher.flush()
    return ended
