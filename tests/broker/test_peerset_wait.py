"""An append on a short peerset waits for the journal's next role change, not a poll:
it proceeds as soon as the broker installs a full pipeline, and is refused with
INSUFFICIENT_JOURNAL_BROKERS if none comes in time (herald.broker.preconditions)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from herald.broker.journal import Journal
from herald.broker.preconditions import await_full_peerset
from herald.broker.replication import Pipeline
from herald.protocol.errors import HeraldError, Status
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec

NAME = "peerset/journal"


async def _noop() -> None:
    pass


async def _short_journal(tmp_path) -> Journal:
    spec = JournalSpec.from_dict(dict(journal_spec(NAME), replication=2))
    journal = await Journal.open(spec, tmp_path, [])
    journal.become_primary(None)  # a peerset of one for a journal that wants two
    return journal


def test_a_waiting_append_proceeds_when_the_peerset_fills(tmp_path):
    async def scenario() -> None:
        journal = await _short_journal(tmp_path)
        async with aiohttp.ClientSession() as session:
            waiting = asyncio.ensure_future(await_full_peerset(journal, timeout_s=60.0))
            await asyncio.sleep(0)  # wait-ok: lets the waiter take the role-change event first
            assert not waiting.done()
            journal.become_primary(Pipeline(NAME, ["http://127.0.0.1:9/peer"], session, _noop))
            await asyncio.wait_for(waiting, 10.0)  # well inside the 60 s it may wait
        await journal.close()

    asyncio.run(scenario())


def test_a_peerset_still_short_after_the_wait_is_refused(tmp_path):
    async def scenario() -> HeraldError:
        journal = await _short_journal(tmp_path)
        try:
            with pytest.raises(HeraldError) as refused:
                await await_full_peerset(journal, timeout_s=0.2)
            # A role change that leaves it short does not let the append through either.
            waiting = asyncio.ensure_future(await_full_peerset(journal, timeout_s=0.5))
            await asyncio.sleep(0)  # wait-ok: lets the waiter take the role-change event first
            journal.become_primary(None)
            with pytest.raises(HeraldError):
                await waiting
        finally:
            await journal.close()
        return refused.value

    err = asyncio.run(scenario())
    assert err.status == Status.INSUFFICIENT_JOURNAL_BROKERS
    assert "1 of its 2 replicas" in str(err)
