"""The word-count journals: documents in, bigram counts out, and how to create them.

Documents go to ``word-count/docs/part-NNN`` (mapped by document name), count
updates to ``word-count/counts/part-NNN`` (mapped by bigram, so every update of
one bigram is in one journal, in commit order). Both are NDJSON, labelled
``app.herald.dev/example=word-count``. `ensure_journals` applies the specs with
create-if-absent, so running it twice changes nothing.
"""

from __future__ import annotations

from typing import Any

from herald.client import BrokerClient
from herald.keyspace.base import Change
from herald.protocol.errors import ValidationError

__all__ = ["COUNTS_SELECTOR", "DOCS_SELECTOR", "MAX_PARTITIONS", "ensure_journals"]

DOCS_PREFIX = "word-count/docs/"
COUNTS_PREFIX = "word-count/counts/"
DOCS_SELECTOR = f"prefix={DOCS_PREFIX}"
COUNTS_SELECTOR = f"prefix={COUNTS_PREFIX}"
MAX_PARTITIONS = 256


def _spec(name: str) -> dict[str, Any]:
    return {"name": name, "replication": 1,
            "labels": [{"name": "content-type", "value": "application/x-ndjson"},
                       {"name": "app.herald.dev/example", "value": "word-count"}],
            "fragment": {"length": 16 << 20, "compression_codec": "SNAPPY", "stores": ["file:///"],
                         "refresh_interval": "1m0s"}}


def ensure_journals(client: BrokerClient, partitions: int) -> list[str]:
    """Create the ``partitions`` document and count journals that do not exist yet;
    returns the names created (none when all exist). Idempotent."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValidationError("partitions", f"want 1..{MAX_PARTITIONS}, got {partitions}")
    existing = {info.name for info in client.list(DOCS_SELECTOR)} | \
        {info.name for info in client.list(COUNTS_SELECTOR)}
    wanted = [f"{prefix}part-{i:03d}" for prefix in (DOCS_PREFIX, COUNTS_PREFIX) for i in range(partitions)]
    missing = [name for name in wanted if name not in existing]
    if missing:
        client.apply([Change.from_dict({"upsert": _spec(name), "expect_mod_revision": 0}, f"journals[{i}]")
                      for i, name in enumerate(missing)])
    return missing
