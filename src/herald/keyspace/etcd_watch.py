"""One etcd watch stream, read a whole revision at a time.

aetcd's ``watch_prefix`` hands out one event at a time, which loses where an etcd
revision ends: a transaction of several keys is one revision of several events,
and a mirror that advanced its revision at the first of them (telling observers
and ``wait_for_revision`` waiters) showed a half-applied transaction, and one whose
watch broke before the rest resumed at ``revision + 1`` and lost them for good.
Here the stream's responses are taken whole: etcd sends every event of a revision
in one response (``fragment`` is not asked for), so each response splits into
complete revisions, applied one by one by the caller.

A response carrying ``compact_revision`` means etcd no longer holds the history
from where we asked to resume (an outage longer than its compaction interval):
`Compacted` tells the caller to reload the whole prefix instead, since retrying the
same revision would fail forever and leave the broker's routes frozen.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator, Sequence

import aetcd
from aetcd import rpc
from aetcd.utils import prefix_range_end


class Compacted(Exception):
    """etcd compacted the revisions we asked to resume from."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"etcd compacted history up to revision {compact_revision}")
        self.compact_revision = compact_revision


async def watch_revisions(client: aetcd.Client, prefix: bytes,
                          start_revision: int) -> AsyncIterator[tuple[int, Sequence]]:
    """Yield ``(revision, events)`` for each revision under ``prefix`` from
    ``start_revision`` on, every event of a revision together. Raises `Compacted`,
    or aetcd's ClientError when the stream breaks (the caller resumes)."""
    await client.connect()
    forever = asyncio.Event()  # the request stream stays open: closing it ends the watch

    async def requests() -> AsyncIterator[rpc.WatchRequest]:
        yield rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=prefix, range_end=prefix_range_end(prefix), start_revision=start_revision))
        await forever.wait()

    call = rpc.WatchStub(client.channel).Watch(requests(), metadata=client.metadata)
    try:
        async for response in call:
            if response.compact_revision:
                raise Compacted(response.compact_revision)
            if response.canceled:
                raise aetcd.exceptions.ClientError(f"etcd cancelled the watch: {response.cancel_reason}")
            for revision, events in split_revisions(response.events):
                yield revision, events
    except rpc.AioRpcError as err:
        raise aetcd.exceptions.ClientError(f"{err.code().name}: {err.details()}") from err
    finally:
        call.cancel()


def split_revisions(events: Sequence) -> Iterator[tuple[int, list]]:
    """A response's events grouped by revision, in order (one response may carry
    several revisions when a watch catches up; never part of one)."""
    for revision, group in itertools.groupby(events, key=lambda event: event.kv.mod_revision):
        yield revision, list(group)
