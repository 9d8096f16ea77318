"""The journals of stream-sum: ``stream-sum/chunks/part-NNN`` and ``stream-sum/sums/part-NNN``.

Chunks are partitioned (a file's chunks map to one partition by its id, modulo
mapping), as Gazette's example partitions its chunks journal; sums are what the
summer publishes and every chunker reads. Applying them again is harmless (a
blind upsert of the same specs).
"""

from __future__ import annotations

from herald.testing.broker import apply_specs, journal_spec

__all__ = ["create_journals"]


def create_journals(url: str, chunk_partitions: int = 4, sum_partitions: int = 1, replication: int = 1) -> list[str]:
    """Create (or re-apply) the chunks and sums journals on the broker at ``url``; returns their names."""
    specs = []
    for role, n in (("chunks", chunk_partitions), ("sums", sum_partitions)):
        for i in range(n):
            spec = journal_spec(f"stream-sum/{role}/part-{i:03d}", length=16 << 20)
            spec["replication"] = replication
            spec["labels"] += [{"name": "app.herald.dev/example", "value": "stream-sum"},
                               {"name": "app.herald.dev/role", "value": role}]
            specs.append(spec)
    apply_specs(url, *specs)
    return [spec["name"] for spec in specs]
