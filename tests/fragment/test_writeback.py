"""Starting the write-back of logged bytes: which chunks a write completes, and a
write-back whose spool is already gone is nothing (`herald.fragment.writeback`)."""

from __future__ import annotations

import functools

import pytest

from herald.fragment import writeback
from herald.fragment.commit_log_worker import write_back_file


@pytest.mark.parametrize("size", [writeback.WRITEBACK_BYTES, 1024])
def test_chunks_completed(size):
    chunks = functools.partial(writeback.chunks_completed, chunk=size)
    assert writeback.chunks_completed(writeback.WRITEBACK_BYTES - 1, 1) == (0, writeback.WRITEBACK_BYTES)
    assert chunks(0, 100) is None
    assert chunks(size - 10, 9) is None
    assert chunks(size - 10, 10) == (0, size)
    assert chunks(size + 5, 3 * size) == (size, 4 * size)
    assert chunks(2 * size, size - 1) is None


def test_write_back_of_a_removed_spool_is_nothing(tmp_path):
    """A spool persisted and removed before its write-back job ran: nothing to do."""
    kept = tmp_path / "kept.spool"
    kept.write_bytes(b"k" * 8192)
    write_back_file(kept, 0, 8192)
    write_back_file(tmp_path / "gone.spool", 0, 8192)
