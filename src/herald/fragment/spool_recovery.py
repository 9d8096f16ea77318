"""Recovering spools after a restart: each truncated to its last verified commit.

A spool's bytes past its last commit line whose SHA1 matches belong to appends that
were never acknowledged (a ``kill -9`` or a power cut mid-group), so recovery cuts
them off [I-APPEND-2] and the journal resumes from exactly the acknowledged bytes
[I-FRAG-2]. Split from `herald.fragment.spool` (writing) because it runs once per
spool at start, on files no `Spool` holds open. Blocking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from herald.fragment.commits import last_verified_commit, read_commit_records
from herald.fragment.spool import COMMITS_SUFFIX, SPOOL_SUFFIX
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet

__all__ = ["RecoveredSpool", "recover_spools"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveredSpool:
    """What a restart finds of a spool: its committed fragment and its registers."""

    fragment: Fragment
    path: Path
    commits_path: Path
    registers: LabelSet
    first_append_unix: float | None


def recover_spools(directory: Path, journal: str,
                   codec: CompressionCodec) -> tuple[list[RecoveredSpool], LabelSet]:
    """Find every spool under ``directory``, truncated to its last commit [I-FRAG-2].

    Bytes past the last complete commit line belong to appends that were never
    acknowledged, so they are cut off [I-APPEND-2]. Empty spools are deleted. Returns
    the non-empty spools and the journal's registers as of its newest spool. Blocking.
    """
    found, latest_registers = [], LabelSet()
    for path in sorted(directory.glob(f"*{SPOOL_SUFFIX}")):
        begin = int(path.stem, 16)
        commits_path = path.with_suffix(COMMITS_SUFFIX)
        end, registers, first, digest = _last_commit(path, commits_path, begin)
        latest_registers = registers
        if end == begin:
            path.unlink(missing_ok=True)
            commits_path.unlink(missing_ok=True)
            continue
        fragment = Fragment(journal=journal, begin=begin, end=end, sum=digest, codec=codec)
        found.append(RecoveredSpool(fragment, path, commits_path, registers, first))
        log.info("recovered spool journal=%s begin=%d end=%d", journal, begin, end)
    return found, latest_registers


def _last_commit(path: Path, commits_path: Path, begin: int) -> tuple[int, LabelSet, float | None, str]:
    """The spool's last verified commit: ``(end, registers, first append, SHA1)``,
    with the spool file truncated to ``end``."""
    try:
        records = read_commit_records(commits_path)
    except FileNotFoundError:
        records = []
    with open(path, "r+b") as f:
        best, digest = last_verified_commit(f, begin, records)
        end = records[best].end if best >= 0 else begin
        f.truncate(end - begin)
    if best < 0:
        return begin, LabelSet(), None, digest
    committed = records[:best + 1]
    first = next((r.first_append_unix for r in reversed(committed) if r.first_append_unix is not None), None)
    return end, LabelSet.from_list(committed[-1].registers), first, digest
