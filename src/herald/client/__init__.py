"""Herald's Python client: list/apply specs, append, read, read offload, batching.

Sync (`BrokerClient`) and async (`AsyncBrokerClient`) clients run the same
sans-I/O protocol code (`herald.client._protocol`); only the runner differs.
`RetryReader` resumes reads across broker failures and offset jumps;
`OffloadReader` / `read_fragment` read persisted fragments straight from their
stores; `AppendService` batches many small appends per journal into few PUTs;
`WatchedList` keeps a selector's journal list current. `Publisher` writes
exactly-once messages through an `AppendService`; `read_committed` reads them
back, each committed message once.

    >>> from herald.client import BrokerClient, RetryReader
    >>> with BrokerClient("http://localhost:8080") as client:      # doctest: +SKIP
    ...     client.append("example/journal", b'{"Msg": "Hello"}\\n')
    ...     for offset, chunk in RetryReader(client, "example/journal", block=False):
    ...         print(offset, chunk)

Names are loaded on first use (PEP 562): a process that needs only the broker
client (a Spark driver's source runner, a watcher) does not import the
Publisher's numpy, the Sequencer or read offload's fragment stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from herald.lazy import lazy_exports

#: Public name → the module that defines it.
_EXPORTS = {
    "AppendResult": "herald.client.models",
    "AppendService": "herald.client.append",
    "AppendSlot": "herald.client.append",
    "AsyncBrokerClient": "herald.client.broker",
    "AsyncReader": "herald.client.broker",
    "Backoff": "herald.client.transient",
    "BrokerClient": "herald.client.broker",
    "ClientSecurity": "herald.client.security",
    "FragmentInfo": "herald.client.models",
    "JournalInfo": "herald.client.models",
    "OffloadReader": "herald.client.retry",
    "Publisher": "herald.client.publisher",
    "ReadHead": "herald.client.models",
    "Reader": "herald.client.broker",
    "RetryReader": "herald.client.retry",
    "WatchedList": "herald.client.watch",
    "is_ack": "herald.client.committed",
    "is_transient": "herald.client.transient",
    "read_committed": "herald.client.committed",
    "read_fragment": "herald.client.offload",
    "read_uncommitted": "herald.client.committed",
    "slice_chunks": "herald.client.offload",
}

__all__ = [
    "AppendResult",
    "AppendService",
    "AppendSlot",
    "AsyncBrokerClient",
    "AsyncReader",
    "Backoff",
    "BrokerClient",
    "ClientSecurity",
    "FragmentInfo",
    "JournalInfo",
    "OffloadReader",
    "Publisher",
    "ReadHead",
    "Reader",
    "RetryReader",
    "WatchedList",
    "is_ack",
    "is_transient",
    "read_committed",
    "read_fragment",
    "read_uncommitted",
    "slice_chunks",
]

if TYPE_CHECKING:
    from herald.client.append import AppendService, AppendSlot
    from herald.client.broker import AsyncBrokerClient, AsyncReader, BrokerClient, Reader
    from herald.client.committed import is_ack, read_committed, read_uncommitted
    from herald.client.models import AppendResult, FragmentInfo, JournalInfo, ReadHead
    from herald.client.offload import read_fragment, slice_chunks
    from herald.client.publisher import Publisher
    from herald.client.retry import OffloadReader, RetryReader
    from herald.client.security import ClientSecurity
    from herald.client.transient import Backoff, is_transient
    from herald.client.watch import WatchedList

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
