"""A spool's commit records: one JSON line per group commit, self-verifying.

Each line is ``{"end": N, "registers": [...], "sum": "<sha1>"}`` (plus
``first_append_unix`` on the spool's first append): ``sum`` is the SHA1 of the
spool's bytes ``[begin, end)`` — the fragment's SHA1 once those bytes commit.

Why the sum: a group's data and its commit record are fdatasync'd *concurrently*
(one sync round per group, not a data sync followed by a record sync), so after a
power cut the record may be on disk while the data it names is not. Recovery
therefore trusts a record only if the spool's bytes hash to its ``sum``; the last
record that verifies is the durable commit, and anything past it belongs to an
append that was never acknowledged and is cut off [I-APPEND-2] [I-FRAG-2]. An
acknowledged group always verifies: it is acknowledged only after *both* syncs
returned [I-APPEND-3]. Lines written before sums existed (no ``sum``) were
written only after their data was synced, and are trusted as they are.

Pure except for reading the two files given to it; blocking.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from herald.protocol.labels import LabelSet

__all__ = ["CommitRecord", "encode_record", "last_verified_commit", "read_commit_records", "record_affixes",
           "registers_json"]

READ_BLOCK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One decoded line: the spool's committed end, registers, first append, SHA1."""

    end: int
    registers: list[dict[str, str]]
    first_append_unix: float | None
    sum: str | None


def encode_record(end: int, registers: LabelSet, sha1_hex: str, first_append_unix: float | None) -> bytes:
    """The line that commits a spool's bytes up to ``end`` (newline included)."""
    record: dict[str, object] = {"end": end, "registers": registers.to_list(), "sum": sha1_hex}
    if first_append_unix is not None:
        record["first_append_unix"] = first_append_unix
    return orjson.dumps(record) + b"\n"


def registers_json(registers: LabelSet) -> bytes:
    """``registers`` as `encode_record` writes them (a spool keeps it while they last)."""
    return orjson.dumps(registers.to_list())


def record_affixes(end: int, registers_json: bytes, first_append_unix: float | None) -> tuple[bytes, bytes]:
    """The line `encode_record` gives, split around its SHA1: ``prefix + sha1_hex +
    suffix`` is that line, so that the C seal (`herald.fragment.spool_sums.seal_framed`)
    writes the sum it computes straight between them. ``registers_json``: from
    `registers_json`. orjson writes a dict's keys in order and no spaces."""
    prefix = b'{"end":%d,"registers":%b,"sum":"' % (end, registers_json)
    if first_append_unix is None:
        return prefix, b'"}\n'
    return prefix, b'","first_append_unix":' + orjson.dumps(first_append_unix) + b'}\n'


def read_commit_records(commits_path: Path, block_bytes: int = 64 << 10) -> list[CommitRecord]:
    """Every complete line of a commits file, in order. A torn or garbage line (a
    commit that never completed) is skipped. Raises FileNotFoundError."""
    records = []
    for line in _written_commit_lines(commits_path, block_bytes).split(b"\n"):
        try:
            raw = orjson.loads(line)
            records.append(CommitRecord(int(raw["end"]), raw.get("registers", []),
                                        raw.get("first_append_unix"), raw.get("sum")))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return records


def _written_commit_lines(commits_path: Path, block_bytes: int) -> bytes:
    """The commits file up to its preallocated zeros (JSON lines hold no NUL): read a
    block at a time, so a restart reads a few hundred bytes per spool, not the whole
    1 MiB preallocation (1 GB for 1,000 journals)."""
    blocks = []
    with open(commits_path, "rb") as f:
        while block := f.read(block_bytes):
            nul = block.find(b"\0")
            if nul >= 0:
                blocks.append(block[:nul])
                break
            blocks.append(block)
    return b"".join(blocks)


def last_verified_commit(data: BinaryIO, begin: int, records: list[CommitRecord]) -> tuple[int, str]:
    """The index of the last record whose bytes are really in ``data`` (the spool
    file, read from its start), and the SHA1 of ``[begin, its end)``; ``(-1, the
    empty SHA1)`` if none verifies.

    Hashes the file once, forward, checking each record's ``sum`` at its end. A
    record whose end lies before bytes already hashed (a stale record of a group
    that failed in-process) restarts the hash: rare, and still correct.
    """
    if records and (fast := _last_if_verified(data, begin, records[-1])) is not None:
        return len(records) - 1, fast
    data.seek(0)
    best = -1
    best_sum = hashlib.sha1().hexdigest()
    hasher, pos = hashlib.sha1(), 0
    for i, record in enumerate(records):
        length = record.end - begin
        if length < pos:
            hasher, pos = hashlib.sha1(), 0
            data.seek(0)
        pos = _hash_up_to(data, hasher, pos, length)
        digest = hasher.hexdigest()
        if pos == length and (record.sum is None or record.sum == digest):
            best, best_sum = i, digest
    return best, best_sum


def _last_if_verified(data: BinaryIO, begin: int, record: CommitRecord) -> str | None:
    """The SHA1 of ``[begin, record.end)`` if it matches the last record: the common
    case (no torn group), checked with one pass and no digest per record, which
    keeps a restart as fast as before sums (a 100 MiB spool of 1 KiB groups: 0.7 s
    record by record)."""
    hasher = hashlib.sha1()
    length = record.end - begin
    if _hash_up_to(data, hasher, 0, length) != length:
        return None
    digest = hasher.hexdigest()
    return digest if record.sum in (None, digest) else None


def _hash_up_to(data: BinaryIO, hasher: hashlib._Hash, pos: int, length: int) -> int:
    """Feed ``data`` from ``pos`` to ``length`` into ``hasher``; returns where it got
    to (short of ``length`` if the file ends first)."""
    while pos < length:
        block = data.read(min(READ_BLOCK_BYTES, length - pos))
        if not block:
            break
        hasher.update(block)
        pos += len(block)
    return pos
