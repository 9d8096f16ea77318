"""Logged rounds leave their commit lines to the commit log (`CommitLog.defer`): a
journal closed and opened again in the same process still recovers every
acknowledged append from its spool files [I-APPEND-3]."""

from __future__ import annotations

import asyncio

from herald.broker.journal import Journal
from herald.fragment.commit_log import CommitLog
from herald.protocol.journal import JournalSpec
from herald.testing import journal_spec


def test_a_journal_reopened_in_process_recovers_every_logged_append(tmp_path):
    data = tmp_path / "data"
    log = CommitLog.open(data)
    specs = [JournalSpec.from_dict(journal_spec(f"deferred/j{i}")) for i in range(4)]

    async def scenario() -> list[int]:
        journals = [await Journal.open(spec, data, [], commit_log=log) for spec in specs]
        # Appends to every journal at once: rounds of several groups, which the log commits.
        for n in range(20):
            await asyncio.gather(*(j.append(b"%s %02d\n" % (j.spec.name.encode(), n)) for j in journals))
        heads = [j.write_head for j in journals]
        for journal in journals:
            await journal.close()
        reopened = [await Journal.open(spec, data, [], commit_log=log) for spec in specs]
        try:
            assert [j.write_head for j in reopened] == heads
        finally:
            for journal in reopened:
                await journal.close()
        return heads

    try:
        heads = asyncio.run(scenario())
    finally:
        log.close()
    assert all(head == 20 * len(b"deferred/j0 00\n") for head in heads)
    assert log.replayed == 0  # nothing here came from a replay: the files held it
