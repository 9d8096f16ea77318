"""Documents in: read files as UTF-8 text and publish each as one message.

A document is one file: ``{"doc": "<path as given>", "text": "<its text>"}``,
published committed (OUTSIDE_TXN) by Herald's `Publisher`, mapped to a journal by
its name (modulo). Every file is read and checked *before* anything is published,
so a bad file (not UTF-8, too large, unreadable) stops the command with an error
naming the file and the byte offset, and nothing of the run is published: a
document is never counted from a lossy decoding.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from herald.client import AppendService, BrokerClient, Publisher
from herald.protocol.errors import ValidationError

__all__ = ["MAX_DOCUMENT_BYTES", "Document", "PublishStats", "publish_documents", "read_documents"]

MAX_DOCUMENT_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class Document:
    name: str
    text: str

    def body(self) -> dict[str, str]:
        return {"doc": self.name, "text": self.text}


@dataclass(frozen=True, slots=True)
class PublishStats:
    documents: int
    text_bytes: int
    elapsed_s: float


def read_document(path: str) -> Document:
    """``path`` as a Document; ValidationError (field: the path) when unreadable,
    larger than MAX_DOCUMENT_BYTES, or not valid UTF-8 (with the first bad byte's offset)."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise ValidationError(path, f"{size} bytes: documents are at most {MAX_DOCUMENT_BYTES} bytes")
        data = file.read_bytes()
    except OSError as err:
        raise ValidationError(path, err.strerror or str(err)) from None
    try:
        return Document(path, data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ValidationError(path, f"not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} "
                                    f"({err.reason}); nothing was published") from None


def read_documents(paths: Sequence[str]) -> list[Document]:
    """Every path as a Document, or the first path's error (before any is published)."""
    if not paths:
        raise ValidationError("FILE", "name at least one document to publish")
    return [read_document(path) for path in paths]


def publish_documents(client: BrokerClient, selector: str, documents: Sequence[Document],
                      mapping: str = "modulo") -> PublishStats:
    """Publish each document committed to the journals ``selector`` picks, keyed by
    its name; returns once every append is durable. Blocks."""
    infos = client.list(selector)
    if not infos:
        raise ValidationError("selector", f"{selector!r} matches no journals: run `setup` first")
    started = time.monotonic()
    with AppendService(client) as service:
        publisher = Publisher(service, infos, mapping=mapping)
        futures = [publisher.publish_committed(doc.name.encode(), doc.body()) for doc in documents]
        publisher.flush()
        for future in futures:
            future.result()
    return PublishStats(len(documents), sum(len(d.text.encode()) for d in documents), time.monotonic() - started)
