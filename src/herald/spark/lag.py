"""Lag of a streaming query: write head − read-through, per journal (gazctl's
``shards list --lag``), from the query's Spark checkpoint.

Spark writes ``offsets/<batch>`` (planned) and ``commits/<batch>`` (done); the
read-through of a journal is its offset in the newest *committed* batch. Each
source's offsets are one JSON line of ``offsets/<batch>``; ours are
``{journal: byte offset}``.

The checkpoint is taken as a job was given it: a Spark ``checkpointLocation``, or a
directory holding one (``herald pipelines dedupe --checkpoint X`` keeps its query's
under ``X/query``), as a path or a ``file:`` URL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from herald.client import BrokerClient
from herald.protocol.errors import ValidationError

__all__ = ["JournalLag", "checkpoint_offsets", "lag", "query_checkpoint"]


@dataclass(frozen=True, slots=True)
class JournalLag:
    journal: str
    read_through: int
    write_head: int

    @property
    def lag(self) -> int:
        return max(0, self.write_head - self.read_through)


def _batches(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def _local_path(location: str | Path) -> Path:
    """``file:///a/b``, ``file:/a/b`` or a path → a local path."""
    text = str(location)
    if text.startswith("file:"):
        text = "/" + text[len("file:"):].lstrip("/")
    elif "://" in text:
        raise ValidationError("checkpoint", f"{text}: only local checkpoints (a path or file: URL) are read")
    return Path(text).expanduser()


def query_checkpoint(location: str | Path) -> Path:
    """The Spark checkpoint directory at ``location``, or the one query checkpoint
    directly under it (a job's own checkpoint holding its query's). Raises
    ValidationError naming what was looked for."""
    root = _local_path(location)
    if (root / "offsets").is_dir():
        return root
    found = sorted(p for p in root.iterdir() if (p / "offsets").is_dir()) if root.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValidationError("checkpoint", f"{root} is not a Spark checkpoint (no offsets/ in it or in a "
                                            "directory under it); give the job's --checkpoint or "
                                            "checkpointLocation")
    raise ValidationError("checkpoint", f"{root} holds several query checkpoints "
                                        f"({', '.join(p.name for p in found)}); name one")


def checkpoint_offsets(checkpoint: str | Path) -> dict[str, int]:
    """``{journal: read-through}`` of the newest committed batch in a Spark
    checkpoint directory (empty if none committed). Raises ValidationError if the
    directory is not a Spark checkpoint."""
    root = query_checkpoint(checkpoint)
    committed = _batches(root / "commits")
    if not committed:
        return {}
    lines = (root / "offsets" / str(committed[-1])).read_text().splitlines()
    out: dict[str, int] = {}
    for line in lines[2:]:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and doc and all(isinstance(v, int) for v in doc.values()):
            out.update({str(k): int(v) for k, v in doc.items()})
    return out


def lag(client: BrokerClient, offsets: dict[str, int]) -> list[JournalLag]:
    """Each journal's read-through next to its current write head."""
    return [JournalLag(j, offsets[j], client.write_head(j)) for j in sorted(offsets)]
