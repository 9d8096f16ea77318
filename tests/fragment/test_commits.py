"""Self-verifying commit records: data and record are synced in one round, so after a
power cut a record may be on disk without its data; recovery must then cut that group
away, never expose it [I-APPEND-2] [I-FRAG-2]."""

from __future__ import annotations

import hashlib
import io

import orjson

from herald.fragment.commits import CommitRecord, last_verified_commit, read_commit_records
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet

REGS = LabelSet.from_list([{"name": "owner", "value": "a"}])


def _spool_with_groups(tmp_path, *groups: list[bytes]) -> Spool:
    spool = Spool(tmp_path / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    for i, group in enumerate(groups):
        spool.append_group(group, REGS if i else LabelSet(), 1000.0 + i)
    spool.close()
    return spool


def _recover(spool: Spool):
    found, registers = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    return found, registers


def test_group_commit_records_the_fragment_sha1_and_recovers_it(tmp_path):
    spool = _spool_with_groups(tmp_path, [b"a\n", b"bb\n"], [b"ccc\n"])
    records = read_commit_records(spool.commits_path)
    assert [r.end for r in records] == [5, 9]
    assert records[-1].sum == hashlib.sha1(b"a\nbb\nccc\n").hexdigest()
    (found,), registers = _recover(spool)
    assert found.fragment.end == 9 and found.fragment.sum == records[-1].sum
    assert registers == REGS and found.first_append_unix == 1000.0


def test_record_on_disk_without_its_data_is_cut_away(tmp_path):
    """A power cut after the record's sync but before the data's: the data file holds
    other bytes (here zeros) where the group should be."""
    spool = _spool_with_groups(tmp_path, [b"first\n"], [b"second\n"])
    with open(spool.path, "r+b") as f:
        f.seek(len(b"first\n"))
        f.write(bytes(len(b"second\n")))
    (found,), registers = _recover(spool)
    assert (found.fragment.begin, found.fragment.end) == (0, 6)
    assert spool.path.read_bytes() == b"first\n"
    assert registers == LabelSet()  # the registers as of the last verified commit


def test_record_past_a_short_data_file_is_cut_away(tmp_path):
    spool = _spool_with_groups(tmp_path, [b"first\n"], [b"second\n"])
    with open(spool.path, "r+b") as f:
        f.truncate(8)  # the file's new size reached the disk, not all of its bytes
    (found,), _registers = _recover(spool)
    assert found.fragment.end == 6 and spool.path.read_bytes() == b"first\n"


def test_no_verified_record_leaves_an_empty_spool_that_is_removed(tmp_path):
    spool = _spool_with_groups(tmp_path, [b"only\n"])
    spool.path.write_bytes(b"ONLY\n")
    found, _registers = _recover(spool)
    assert found == [] and not spool.path.exists()


def test_torn_last_line_is_ignored(tmp_path):
    spool = _spool_with_groups(tmp_path, [b"kept\n"], [b"lost\n"])
    raw = spool.commits_path.read_bytes()
    first_line_end = raw.index(b"\n") + 1
    torn = raw[:first_line_end] + raw[first_line_end:raw.index(b"\n", first_line_end) - 5]
    spool.commits_path.write_bytes(torn)
    (found,), _registers = _recover(spool)
    assert found.fragment.end == 5


def test_lines_without_a_sum_are_trusted_as_before(tmp_path):
    """Spools written before records carried sums synced data first: still recovered."""
    directory = tmp_path / "legacy"
    directory.mkdir()
    (directory / f"{0:016x}.spool").write_bytes(b"old bytes\nuncommitted")
    (directory / f"{0:016x}.commits").write_bytes(
        orjson.dumps({"end": 10, "registers": [], "first_append_unix": 5.0}) + b"\n" + bytes(100))
    (found,), _registers = recover_spools(directory, "legacy", CompressionCodec.NONE)
    assert found.fragment.end == 10 and found.first_append_unix == 5.0
    assert found.fragment.sum == hashlib.sha1(b"old bytes\n").hexdigest()


def test_a_stale_record_beyond_a_later_one_restarts_the_hash():
    """A group that failed in-process left a record (end 8) that a later, shorter
    group (end 6) followed: the stale one never verifies, the later one does."""
    data = b"abc\nde"
    def rec(end: int, content: bytes) -> CommitRecord:
        return CommitRecord(end, [], None, hashlib.sha1(content).hexdigest())
    records = [rec(4, b"abc\n"), rec(8, b"abc\nXXXX"), rec(6, data)]
    best, digest = last_verified_commit(io.BytesIO(data), 0, records)
    assert best == 2 and digest == hashlib.sha1(data).hexdigest()


def _precommit(spool: Spool, end: int, now: float) -> tuple[int, float | None]:
    """What the primary does for a group in flight: its line, synced beside its data."""
    line, at, first = spool.precommit_line(end, spool.pending_sha1_hex(), REGS, now)
    spool.sync_precommit(line, at)
    return len(line), first


def test_precommitted_groups_commit_in_order_and_a_failed_one_is_dropped(tmp_path):
    """A pipelining primary (herald.broker.primary_pipeline) syncs each group's data and
    commit line while its peers sync theirs, and commits in memory only once they
    answered: readers see nothing before; a later group that failed has its line
    zeroed, so a crash recovers exactly the committed groups."""
    spool = Spool(tmp_path / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    with spool.holding_descriptors():
        assert spool.write_pending([b"one\n"]) == [hashlib.sha1(b"one\n").hexdigest()]
        after_one = spool.pending_sha1_hex()
        one_line, first = _precommit(spool, 4, 1000.0)
        before_two = spool.mark()
        spool.write_pending([b"two\n", b"2\n"])
        _precommit(spool, 10, 1000.5)
        assert (spool.end, spool.pending_bytes) == (0, 10)  # nothing visible: no peer answered
        spool.commit_precommitted(4, after_one, REGS, first, one_line)
        assert (spool.end, spool.pending_bytes, spool.registers) == (4, 6, REGS)
        assert spool.fragment().sum == after_one
        spool.rollback(before_two)  # the second group's peers failed: forget it, keep the first
        spool.drop_precommits()
        (found,), registers = _recover(spool)  # a crash now: only the first group is committed
        assert (found.fragment.end, found.fragment.sum, registers) == (4, after_one, REGS)
        assert spool.path.read_bytes() == b"one\n"
        spool.write_pending([b"three\n"])
        three_line, _ = _precommit(spool, 10, 1001.0)  # over the dropped line
        spool.commit_precommitted(10, spool.pending_sha1_hex(), REGS, None, three_line)
    spool.close()
    (found,), _ = _recover(spool)
    assert spool.path.read_bytes() == b"one\nthree\n"
    assert found.fragment.sum == hashlib.sha1(b"one\nthree\n").hexdigest()
    assert found.first_append_unix == 1000.0
    assert [r.end for r in read_commit_records(spool.commits_path)] == [4, 10]


def test_a_line_synced_before_its_group_failed_recovers_the_group_after_a_crash(tmp_path):
    """Killed after a group's line was synced here but before its peers answered (so
    before any acknowledgement): the bytes survive the restart, as they would on a peer
    that committed them; the sync after the restart makes the furthest replica win
    (docs/cluster.md: journals are at-least-once). Never a byte the line does not name."""
    spool = Spool(tmp_path / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    with spool.holding_descriptors():
        spool.write_pending([b"one\n"])
        _precommit(spool, 4, 1000.0)
        spool.write_pending([b"unsynced\n"])  # written, its line never was
    (found,), _ = _recover(spool)
    assert (found.fragment.end, spool.path.read_bytes()) == (4, b"one\n")
