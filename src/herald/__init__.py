"""Herald: Gazette's journals, fragments and exactly-once messages in Python, with
pipelines on Apache Spark.

What an application needs is importable from here (docs/python.md is the quickstart):

    from herald import BrokerClient, AppendService, Publisher, read_committed
    from herald import JournalSpec, FragmentSpec, LabelSet, Change

    with BrokerClient("http://localhost:8080") as client:
        client.apply([Change(0, upsert=JournalSpec("events/part-000"))])   # 0: create
        with AppendService(client) as service:
            Publisher(service, ["events/part-000"]).publish_committed(b"k1", {"n": 1})
        for message in read_committed(client, "events/part-000"):
            print(message.value)

Names are loaded on first use (PEP 562), so ``import herald.protocol`` stays light —
Spark workers and the pure layers do not pay for the HTTP client.

Packages (docs/modules.md maps every module): ``protocol`` and ``message`` are pure vocabulary;
``fragment`` holds spools, the cover set and stores; ``broker`` is the asyncio server;
``client`` talks to it; ``spark`` is the PySpark data source; ``pipelines`` are jobs
built on it; ``cli`` is the ``herald`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from herald.lazy import lazy_exports
from herald.lean_httpx import install as _lean_httpx

_lean_httpx()  # before any Herald module imports httpx: no click/rich/pygments in Spark workers

__version__ = "0.1.0"

#: Public name → the module that defines it.
_EXPORTS = {
    "AppendResult": "herald.client",
    "AppendService": "herald.client",
    "AsyncBrokerClient": "herald.client",
    "BrokerClient": "herald.client",
    "Change": "herald.keyspace.base",
    "ClientSecurity": "herald.client",
    "CompressionCodec": "herald.protocol",
    "Envelope": "herald.message",
    "FragmentInfo": "herald.client",
    "FragmentSpec": "herald.protocol",
    "HeraldError": "herald.protocol",
    "JournalInfo": "herald.client",
    "JournalSpec": "herald.protocol",
    "LabelSelector": "herald.protocol",
    "LabelSet": "herald.protocol",
    "Publisher": "herald.client",
    "RetryReader": "herald.client",
    "ValidationError": "herald.protocol",
    "WatchedList": "herald.client",
    "is_ack": "herald.client",
    "read_committed": "herald.client",
    "read_uncommitted": "herald.client",
}

__all__ = [
    "AppendResult",
    "AppendService",
    "AsyncBrokerClient",
    "BrokerClient",
    "Change",
    "ClientSecurity",
    "CompressionCodec",
    "Envelope",
    "FragmentInfo",
    "FragmentSpec",
    "HeraldError",
    "JournalInfo",
    "JournalSpec",
    "LabelSelector",
    "LabelSet",
    "Publisher",
    "RetryReader",
    "ValidationError",
    "WatchedList",
    "__version__",
    "is_ack",
    "read_committed",
    "read_uncommitted",
]

if TYPE_CHECKING:
    from herald.client import (
        AppendResult,
        AppendService,
        AsyncBrokerClient,
        BrokerClient,
        ClientSecurity,
        FragmentInfo,
        JournalInfo,
        Publisher,
        RetryReader,
        WatchedList,
        is_ack,
        read_committed,
        read_uncommitted,
    )
    from herald.keyspace.base import Change
    from herald.message import Envelope
    from herald.protocol import (
        CompressionCodec,
        FragmentSpec,
        HeraldError,
        JournalSpec,
        LabelSelector,
        LabelSet,
        ValidationError,
    )

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
