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
"""

from herald.client.append import AppendService, AppendSlot
from herald.client.broker import AsyncBrokerClient, AsyncReader, BrokerClient, Reader
from herald.client.committed import is_ack, read_committed, read_uncommitted
from herald.client.models import AppendResult, FragmentInfo, JournalInfo, ReadHead
from herald.client.publisher import Publisher
from herald.client.retry import Backoff, OffloadReader, RetryReader, is_transient, read_fragment, slice_chunks
from herald.client.security import ClientSecurity
from herald.client.watch import WatchedList

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
