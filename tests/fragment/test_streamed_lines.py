"""A streamed body's commit line goes ahead: written and synced as soon as the body's
SHA1 is whole, beside its data's sync (`herald.fragment.spool_stream.StreamedWrite`).
Such a line may reach the disk before its data: recovery must never trust it then,
and its append is answered only once both syncs returned [I-APPEND-3] [I-FRAG-2]."""

from __future__ import annotations

import hashlib

from herald.fragment.commits import encode_record, read_commit_records
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_stream import STREAM_MIN_BYTES, WRITEBACK_MIN_BYTES, SpoolStream, _native_writeback
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet

PIECE_BYTES = 100_000
#: Large enough that its write-back starts twice before its last piece (where the
#: C extension has `start_writeback`): bytes the device already has are synced the same.
BODY = bytes(range(256)) * (4 * STREAM_MIN_BYTES // 256 + 3)
REGISTERS = LabelSet.from_list([{"name": "cursor", "value": "7"}])


def _spool(root) -> Spool:
    """A spool (no commit log: its rounds sync in place) holding ``one\\n``, committed."""
    spool = Spool(root / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    assert write_round([GroupWrite(spool, [b"one\n"], LabelSet(), 1.0)]) == [[hashlib.sha1(b"one\n").hexdigest()]]
    return spool


def _streamed(spool: Spool, before_last_piece=lambda: None) -> SpoolStream:
    """``BODY`` streamed into ``spool`` (descriptors pinned: unpin after its round)."""
    assert spool._pool.pin_if_open(spool)
    stream = SpoolStream(spool, len(BODY))
    for at in range(0, len(BODY), PIECE_BYTES):
        if at + PIECE_BYTES >= len(BODY):
            before_last_piece()
        stream.write(BODY[at:at + PIECE_BYTES])
    if _native_writeback is not None:  # the write-back went ahead of the last piece
        assert stream._written_back >= 2 * WRITEBACK_MIN_BYTES
    return stream


def test_a_streamed_bodys_line_is_the_one_a_round_writes_and_is_written_once(tmp_path):
    """The line written ahead is `encode_record`'s for the body (registers, fragment
    SHA1, first append), at the commits file's end, before the round runs; the
    round adopts it, and the file holds each commit once."""
    spool = _spool(tmp_path)
    stream = _streamed(spool)
    try:
        write = stream.group_write(REGISTERS, 2.0)
        stream.sums.settle()  # the line goes ahead once the body is hashed, round or not
        whole = hashlib.sha1(b"one\n" + BODY).hexdigest()
        line = encode_record(4 + len(BODY), REGISTERS, whole, None)
        assert spool.commits_path.read_bytes()[spool._commits_pos:][:len(line)] == line
        assert write_round([write]) == [[hashlib.sha1(BODY).hexdigest()]]
    finally:
        spool._pool.unpin(spool)
    assert spool.fragment().sum == whole and spool.registers == REGISTERS
    assert [r.end for r in read_commit_records(spool.commits_path)] == [4, 4 + len(BODY)]
    spool.close()
    (found,), registers = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    assert found.path.read_bytes() == b"one\n" + BODY and registers == REGISTERS


def test_a_line_that_went_ahead_of_a_failed_data_sync_never_commits_its_body(powercut):
    """The body's data fdatasync fails (EIO, a failing disk) while its line, written
    ahead, was synced: the append fails and, after a power cut, the durable line
    names bytes the disk never got. Recovery hashes the spool, finds the line's SHA1
    wrong and ends the journal at the last commit that verifies [I-APPEND-2]; the
    next append, acknowledged, survives [I-FRAG-2]."""
    spool = _spool(powercut.mount)
    mark = spool.mark()
    stream = _streamed(spool, lambda: powercut.fail_next_sync(spool.path))
    try:
        (failed,) = write_round([stream.group_write(LabelSet(), 2.0)])
    finally:
        spool._pool.unpin(spool)
    assert isinstance(failed, OSError)
    spool.rollback(mark)  # as the append task does
    spool.close()
    powercut.cut()  # the line's sync made it durable; the data's made nothing durable
    powercut.start()
    ends = [r.end for r in read_commit_records(spool.commits_path)]
    assert ends == [4, 4 + len(BODY)], "the line did not go ahead of its data: this proved nothing"
    (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    assert found.fragment.end == 4 and found.path.read_bytes() == b"one\n"


def test_an_acknowledged_streamed_body_survives_a_power_cut(powercut):
    spool = _spool(powercut.mount)
    stream = _streamed(spool)
    try:
        assert write_round([stream.group_write(LabelSet(), 2.0)]) == [[hashlib.sha1(BODY).hexdigest()]]
    finally:
        spool._pool.unpin(spool)
    spool.close()
    powercut.cut()
    powercut.start()
    (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    assert found.path.read_bytes() == b"one\n" + BODY
    assert found.fragment.sum == hashlib.sha1(b"one\n" + BODY).hexdigest()
