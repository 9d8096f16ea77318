"""Fixtures for pipeline tests: a broker with ``events/`` and ``deduped/`` partitions."""

from __future__ import annotations

import pytest

from herald.client import BrokerClient
from herald.testing import apply_specs, journal_spec


def partitions(url: str, prefix: str, n: int = 4) -> list[str]:
    """Create ``<prefix>part-000..`` NDJSON journals; returns their names."""
    names = [f"{prefix}part-{i:03d}" for i in range(n)]
    specs = [journal_spec(name) for name in names]
    for spec in specs:
        spec["labels"].append({"name": "app.herald.dev/pipeline", "value": "dedupe"})
    apply_specs(url, *specs)
    return names


@pytest.fixture
def client(broker):
    with BrokerClient(broker.url, timeout_s=30) as c:
        yield c


@pytest.fixture
def make_partitions(broker):
    """``make_partitions(prefix, n)``: create n NDJSON partitions on ``broker``."""
    return lambda prefix, n=4: partitions(broker.url, prefix, n)


@pytest.fixture
def journals(broker) -> tuple[list[str], list[str]]:
    """Four input and four output partitions, as the demo makes."""
    return partitions(broker.url, "events/"), partitions(broker.url, "deduped/")
