"""The journals of stream-sum: ``stream-sum/chunks/part-NNN`` and ``stream-sum/sums/part-NNN``.

Chunks are partitioned (a file's chunks map to one partition by its id, modulo
mapping), as Gazette's example partitions its chunks journal; sums are what the
summer publishes and every chunker reads. Only missing journals are created:
an existing one (say, replicated differently by its operator) is left as it is.
"""

from __future__ import annotations

from herald.client import BrokerClient
from herald.testing.broker import apply_specs, journal_spec

__all__ = ["create_journals"]


def create_journals(url: str, chunk_partitions: int = 4, sum_partitions: int = 1, replication: int = 1) -> list[str]:
    """Create the chunks and sums journals missing on the broker at ``url``; returns all their names."""
    specs = []
    for role, n in (("chunks", chunk_partitions), ("sums", sum_partitions)):
        for i in range(n):
            spec = journal_spec(f"stream-sum/{role}/part-{i:03d}", length=16 << 20)
            spec["replication"] = replication
            spec["labels"] += [{"name": "app.herald.dev/example", "value": "stream-sum"},
                               {"name": "app.herald.dev/role", "value": role}]
            specs.append(spec)
    with BrokerClient(url) as client:
        existing = {info.name for info in client.list("prefix=stream-sum/")}
    missing = [spec for spec in specs if spec["name"] not in existing]
    if missing:
        apply_specs(url, *missing)
    return [spec["name"] for spec in specs]
