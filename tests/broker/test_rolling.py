"""Spool rolling rules (gazette-facts §4.5), driven in-process with an explicit clock."""

from __future__ import annotations

import asyncio

from herald.broker.journal import Journal
from herald.fragment.stores import open_store
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec


def run(coro):
    return asyncio.run(coro)


def spec(**fragment) -> JournalSpec:
    return JournalSpec.from_dict(journal_spec("roll/journal", **fragment))


async def opened(tmp_path, **fragment) -> Journal:
    s = spec(**fragment)
    stores = [open_store(url, str(tmp_path / "store")) for url in s.fragment.stores]
    return await Journal.open(s, tmp_path / "data", stores)


def test_flush_interval_rolls_at_utc_aligned_boundaries(tmp_path):
    async def scenario():
        journal = await opened(tmp_path, flush_interval="1h0m0s")
        await journal.append(b"first\n")
        spool_begin = journal.spool_position()[0]
        first = journal._spool.first_append_unix
        boundary = (first // 3600 + 1) * 3600
        journal._maybe_roll(boundary - 1)  # same hour: no roll
        assert journal.spool_position()[0] == spool_begin
        journal._maybe_roll(boundary)  # the next UTC hour began: roll
        assert journal.spool_position()[0] == journal.write_head == 6
        await journal.close()

    run(scenario())


def test_length_rolls_only_once_a_fragment_exceeds_it(tmp_path):
    async def scenario():
        journal = await opened(tmp_path, length=1024)
        await journal.append(b"x" * 1024)
        journal._maybe_roll(0)
        assert journal.spool_position()[0] == 0  # exactly the length: not yet (strictly greater)
        await journal.append(b"y")  # checked before this append: 1024 is not > 1024
        assert journal.spool_position()[0] == 0  # so the fragment overshoots by one append
        await journal.append(b"z")  # 1025 > 1024: rolled before writing
        assert journal.spool_position()[:2] == (1025, 1026)
        await journal.close()
        names = sorted(p.name for p in (tmp_path / "store" / "roll" / "journal").iterdir())
        assert [n[:33] for n in names] == ["0000000000000000-0000000000000401",
                                           "0000000000000401-0000000000000402"]

    run(scenario())
