"""Fixtures of the Spark tests (helpers live in spark_helpers.py)."""

from __future__ import annotations

import pytest

from herald.client import BrokerClient


@pytest.fixture
def client(broker):
    """A sync client of the test's broker."""
    with BrokerClient(broker.url) as c:
        yield c
