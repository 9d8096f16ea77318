"""Fixtures for client tests: a client of a real broker."""

from __future__ import annotations

import pytest

from herald.client import BrokerClient


@pytest.fixture
def client(broker):
    with BrokerClient(broker.url, timeout_s=10) as c:
        yield c

