"""`FragmentKeeper.drain` (the SIGTERM path) against a real file store that fails."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field

from herald.broker.fragment_keeper import Completed, FragmentKeeper
from herald.broker.tasks import TaskSet
from herald.fragment.index import Index
from herald.fragment.stores import Store, open_store
from herald.protocol.fragment import CompressionCodec, Fragment
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

NAME = "keeper/journal"
DEADLINE_S = 30.0  # fails loudly; the drain under test would otherwise wait an hour


@dataclass
class KeptJournal:
    """The little a keeper needs of its journal (`fragment_keeper.KeptJournal`)."""

    stores: list[Store]
    spec: JournalSpec = field(default_factory=lambda: JournalSpec.from_dict(journal_spec(NAME)))
    index: Index = field(default_factory=Index)

    def wake_readers(self) -> None:
        pass

    def poke(self) -> None:
        pass


def test_drain_stops_waiting_on_a_failing_store_after_a_short_grace(tmp_path):
    root = tmp_path / "root"
    root.write_bytes(b"a file where the store's directory should be")  # every upload fails
    spool = tmp_path / "spool"
    spool.write_bytes(b"seed\n")
    fragment = Fragment(NAME, 0, 5, hashlib.sha1(b"seed\n").hexdigest(), CompressionCodec.NONE)

    async def stop_with_a_spool_queued() -> FragmentKeeper:
        persisting = TaskSet("persisting")
        keeper = FragmentKeeper(KeptJournal([open_store("file:///", root)]), TaskSet("refreshing"), persisting)
        keeper.hand_over(Completed(fragment, spool, tmp_path / "spool.commits"))  # starts the persister
        await asyncio.wait_for(keeper.drain(timeout_s=3600.0), DEADLINE_S)  # only the grace ends it
        await persisting.stop()
        return keeper

    keeper = asyncio.run(stop_with_a_spool_queued())
    assert keeper.store_failing is not None and keeper.store_failing.is_set()
    assert spool.read_bytes() == b"seed\n"  # kept on local disk, persisted after restart
