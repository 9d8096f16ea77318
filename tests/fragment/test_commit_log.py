"""The broker-wide commit log: records frame and decode exactly, a torn tail is
ignored, and replaying a log restores every logged group into its spool (twice
over as well as once) before the spools recover [I-FRAG-2]."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herald.fragment import commit_log as commit_log_module
from herald.fragment import writeback
from herald.fragment.commit_log import INLINE_BYTES, LOG_DIR, CommitLog
from herald.fragment.commit_log_records import LogRecord, decode_records, frame
from herald.fragment.commit_log_replay import replay_segments
from herald.fragment.commit_log_worker import write_lines
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import logged_to, round_syncs, write_round
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_stream import STREAM_MIN_BYTES, SpoolStream
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet
from tests.fragment.logged_spools import forget_unsynced, logged_spools, open_log

records = st.builds(
    LogRecord, directory=st.text(max_size=40), begin=st.integers(0, 2**64 - 1),
    data_at=st.integers(0, 2**64 - 1), line_at=st.integers(0, 2**64 - 1),
    line=st.binary(max_size=200), data=st.binary(max_size=3000))


def _framed(record: LogRecord) -> bytes:
    parts = frame(record.directory.encode(), record.begin, record.data_at, record.line_at, record.line,
                  [record.data[:7], record.data[7:]])
    return b"".join(parts)


@settings(deadline=None)  # a loaded machine is slow, not wrong
@given(st.lists(records, max_size=8))
def test_records_round_trip(logged):
    assert list(decode_records(b"".join(map(_framed, logged)) + bytes(64))) == logged


@settings(deadline=None)
@given(st.lists(records, min_size=1, max_size=5), st.data())
def test_a_torn_or_corrupt_tail_ends_the_intact_records(logged, data):
    buffers = [_framed(r) for r in logged]
    intact = data.draw(st.integers(0, len(logged) - 1))
    torn = bytearray(buffers[intact])
    if data.draw(st.booleans()):
        torn = torn[:data.draw(st.integers(0, len(torn) - 1))]  # cut mid-write
    else:
        i = data.draw(st.integers(0, len(torn) - 1))
        torn[i] ^= 1 << data.draw(st.integers(0, 7))  # a flipped bit anywhere
    assert list(decode_records(b"".join(buffers[:intact]) + bytes(torn))) == logged[:intact]


def test_replay_restores_every_logged_group(data_dir):
    root, opened = data_dir
    log = open_log(root, opened)
    spools = logged_spools(log, 4)
    big = b"B" * INLINE_BYTES
    groups = [[b"one\n"], [b"two\n", b"three\n"], [big], [b"four\n"]]
    for group in groups:
        assert logged_to([GroupWrite(s, group, LabelSet(), 1.0) for s in spools]) is log
        writes = [GroupWrite(s, group, LabelSet(), 1.0) for s in spools]
        assert round_syncs(writes) == ((len(spools), 0) if group == [big] else (0, 0))
        outcomes = write_round(writes)
        assert outcomes == [[hashlib.sha1(b).hexdigest() for b in group]] * len(spools)
    expected = b"".join(b"".join(g) for g in groups)
    inline = sum(len(b"".join(g)) for g in groups if g != [big])
    logged = b"".join(p.read_bytes() for p in (root / LOG_DIR).iterdir())
    assert len(logged) > inline * len(spools)  # the small groups' bytes are in the log…
    assert big[:4096] not in logged  # …a large one's are not (synced in the spool itself)
    for spool in spools:
        forget_unsynced(spool)
        spool.path.write_bytes(bytes(len(b"one\ntwo\nthree\n")) + big)  # as the data sync left it
    log.close()
    copy = root.parent / "segments"
    shutil.copytree(root / LOG_DIR, copy)
    open_log(root, opened)  # replays, then the spools recover
    assert list((root / LOG_DIR).iterdir()) == [] or all(
        p.name not in {c.name for c in copy.iterdir()} for p in (root / LOG_DIR).iterdir())  # replayed: gone
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == expected
        assert found.fragment.end == len(expected)
    # Replay again (a crash during the first): the same bytes at the same places.
    assert replay_segments(root, sorted(copy.iterdir())) == len(groups) * len(spools)
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == expected


def test_records_of_persisted_spools_are_skipped(data_dir):
    root, opened = data_dir
    log = open_log(root, opened)
    kept, persisted = logged_spools(log, 2)
    write_round([GroupWrite(s, [b"x\n"], LabelSet(), 1.0) for s in (kept, persisted)])
    persisted.remove_files()
    forget_unsynced(kept)
    log.close()
    assert open_log(root, opened).replayed == 1
    assert kept.path.read_bytes() == b"x\n"
    assert not persisted.path.exists()


def test_a_full_segment_is_checkpointed_and_replaced(data_dir):
    root, opened = data_dir
    syncs: list[tuple[str, int]] = []
    log = CommitLog.open(root, lambda kind, n: syncs.append((kind, n)), segment_bytes=4096)
    opened.append(log)
    spools = logged_spools(log, 2)
    for i in range(40):
        write_round([GroupWrite(s, [b"%03d" % i + b"." * 200 + b"\n"], LabelSet(), 1.0) for s in spools])
    log.drain()
    assert log._idle.is_set()
    segments = list((root / LOG_DIR).iterdir())
    # The sealed ones were synced into their spools, then deleted; the next one may be made ahead.
    assert log.segment in segments and len(segments) <= 2
    assert all(not p.read_bytes().strip(b"\0") for p in segments if p != log.segment)
    assert ("fdatasync", 1) in syncs and len(syncs) > 40  # a sync per round, plus checkpoints
    assert [s.content_length for s in spools] == [40 * 204] * 2


def test_two_data_dirs_in_one_process_never_share_a_log(data_dir):
    """Two brokers' data dirs in one process (the same layout under each): a round
    goes to the log its spools were given, never the other's; a round mixing both,
    or of spools whose log is closed, syncs in place."""
    root, opened = data_dir
    logs = [open_log(root / name, opened) for name in ("a", "b")]
    spools = [logged_spools(log, 2) for log in logs]
    for log, own, line in zip(logs, spools, (b"a\n", b"b\n")):
        assert logged_to([GroupWrite(s, [line], LabelSet(), 1.0) for s in own]) is log
        write_round([GroupWrite(s, [line], LabelSet(), 1.0) for s in own])
    mixed = [GroupWrite(own[0], [b"mixed\n"], LabelSet(), 1.0) for own in spools]
    assert logged_to(mixed) is None
    write_round(mixed)
    for log, line in zip(logs, (b"a\n", b"b\n")):
        logged = [r for p in log.directory.iterdir() for r in decode_records(p.read_bytes())]
        assert sorted((r.directory, r.data) for r in logged) == [("spools/j0", line), ("spools/j1", line)]
    logs[0].close()
    closed = [GroupWrite(s, [b"c\n"], LabelSet(), 1.0) for s in spools[0]]
    assert logged_to(closed) is None
    assert write_round(closed) == [[hashlib.sha1(b"c\n").hexdigest()]] * 2


def test_segments_grow_ahead_of_the_rounds(data_dir):
    """The helper thread adds the next zeros before a round needs them; what a
    round wrote always stays below the durable size."""
    root, opened = data_dir
    log = open_log(root, opened)
    spools = logged_spools(log, 2)  # two groups a round: always logged
    for i in range(8):
        write_round([GroupWrite(s, [b"%d" % i + b"g" * (100 << 10)], LabelSet(), 1.0) for s in spools])
        log.drain()
        assert log._pos < log._allocated == os.fstat(log._fd).st_size
    assert log._allocated - log._pos >= commit_log_module.FIRST_GROW_BYTES // 2


def test_the_next_segment_is_made_whole_ahead_of_the_rounds(data_dir):
    """Once a segment is half full, the helper thread makes the next one whole in a
    file of its own (a round's fdatasync never carries its zeros); the rotation takes
    it as it is, with no growth. A making cut short is removed at the next start, and
    a made segment never used replays as nothing."""
    root, opened = data_dir
    (root / LOG_DIR).mkdir(parents=True)
    (root / LOG_DIR / f"{7:016x}{commit_log_module.SPARE_SUFFIX}").write_bytes(b"cut short")
    log = CommitLog.open(root, segment_bytes=64 << 10)
    opened.append(log)
    assert not list((root / LOG_DIR).glob(f"*{commit_log_module.SPARE_SUFFIX}"))
    spools = logged_spools(log, 2)
    first = log.segment
    while log.segment == first:
        write_round([GroupWrite(s, [b"r" * 8000 + b"\n"], LabelSet(), 1.0) for s in spools])
        log.drain()
    assert log._spare == int(log.segment.stem, 16)  # taken as made: whole, nothing grown
    assert log._allocated == os.fstat(log._fd).st_size >= 64 << 10
    while not (made := log.directory / f"{int(log.segment.stem, 16) + 1:016x}.log").exists():
        write_round([GroupWrite(s, [b"s" * 8000 + b"\n"], LabelSet(), 1.0) for s in spools])
        log.drain()
    assert not made.read_bytes().strip(b"\0")
    for spool in spools:
        spool.close()
    log.close()
    log = open_log(root, opened)  # replays the used segments and the made one (nothing), then deletes them
    assert not made.exists() and [p.name for p in log.directory.iterdir()] == [log.segment.name]


LAST_ROUNDS = 2  # only logged when the power goes (a few KiB: they cannot fill a segment)


@pytest.mark.parametrize("writeback_bytes", [writeback.WRITEBACK_BYTES, 1024], ids=["writeback-rare", "writeback-often"])
def test_a_power_cut_loses_no_round_logged_or_checkpointed(powercut, writeback_bytes):
    """On a file system that drops what was never synced (`herald.testing.powercut`),
    with segments small enough that most rounds were checkpointed and the last ones
    only logged: every round's bytes are back after the cut and the replay. With
    write-back started every KiB, it runs beside the checkpoints and never stands
    for their syncs (on this file system it makes nothing durable, as on a disk).

    Where the last rounds land is made certain, not left to the helper thread's
    timing: a segment is sealed only when no checkpoint is under way, so how many
    rounds each segment holds varies, and a last round that happened to fill one
    was checkpointed, leaving the cut nothing to drop. So once the helper thread is
    idle, rounds go on until one seals its segment (its checkpoint syncs every
    round so far), and the last ones go to the fresh segment, too few to fill it."""
    root = powercut.mount / "data"
    log = CommitLog.open(root, segment_bytes=8192, writeback_bytes=writeback_bytes)
    spools = logged_spools(log, 3)
    groups: list[bytes] = []
    for _ in range(60):  # checkpoints run beside the rounds
        _logged_round(log, spools, groups)
    log.drain()  # no checkpoint under way: the next full segment is sealed at once
    sealed = log.segment
    while log.segment == sealed:
        _logged_round(log, spools, groups)
    log.drain()  # its checkpoint synced every round so far
    checkpointed, last = b"".join(groups), log.segment
    for _ in range(LAST_ROUNDS):
        _logged_round(log, spools, groups)
    assert log.segment == last, "the last rounds filled a segment: a checkpoint synced them"
    expected = b"".join(groups)
    for spool in spools:
        spool.close()
    log.close()  # syncs nothing more
    report = powercut.cut()
    assert report.unsynced_bytes >= len(spools) * (len(expected) - len(checkpointed)), \
        "the cut dropped less than the last rounds' bytes: this run proves nothing"
    powercut.start()
    for spool in spools:  # the disk holds the checkpointed rounds, the last ones are gone
        on_disk = spool.path.read_bytes()
        assert on_disk.startswith(checkpointed) and not on_disk[len(checkpointed):].strip(b"\0")
    reopened = CommitLog.open(root)
    reopened.close()
    assert reopened.replayed == LAST_ROUNDS * len(spools)  # the checkpointed rounds need no replay
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == expected


def _logged_round(log: CommitLog, spools: list[Spool], groups: list[bytes]) -> None:
    """One round of one group per spool, which the log commits; its group added to ``groups``."""
    group = [b"%03d " % len(groups) + b"y" * 300 + b"\n"]
    writes = [GroupWrite(s, group, LabelSet(), 1.0) for s in spools]
    assert logged_to(writes) is log
    assert write_round(writes) == [[hashlib.sha1(group[0]).hexdigest()]] * len(spools)
    groups.append(group[0])


def test_a_round_whose_log_sync_fails_is_never_replayed(powercut):
    """An I/O error on the log's fdatasync fails the round; its records are zeroed
    and later rounds go to a new segment (the failed one is checkpointed), so after
    a power cut the restart brings back the groups before and after it, and never
    the failed one [I-APPEND-2]."""
    root, log, spools, marks = _one_logged_round(powercut)
    powercut.fail_next_sync(log._segment_path(log._seq))  # EIO, as from a failing disk
    failed = write_round([GroupWrite(s, [b"lost\n"], LabelSet(), 1.0) for s in spools])
    assert all(isinstance(outcome, OSError) for outcome in failed)
    for spool, mark in zip(spools, marks):
        spool.rollback(mark)  # as the append task does
    write_round([GroupWrite(s, [b"two\n"], LabelSet(), 1.0) for s in spools])
    log.drain()
    (segment,) = (root / LOG_DIR).iterdir()  # the failed round's was checkpointed and deleted
    assert not [r for r in decode_records(segment.read_bytes()) if b"lost" in r.data]
    assert _after_power_cut(powercut, root, spools, log) == 2
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == b"one\ntwo\n"


def test_a_logged_round_whose_large_group_fails_its_data_sync_is_taken_back(powercut):
    """A large group's bytes are synced in its spool beside the log's sync, after its
    record (its commit line) is logged. If that sync fails, the whole round fails and
    its records are zeroed: the failed group's place is written again by the next
    group, and a replayed line over that group's would cut an acknowledged append
    off at recovery [I-FRAG-2]."""
    root, log, spools, marks = _one_logged_round(powercut)
    powercut.fail_next_sync(spools[0].path)
    failed = write_round([GroupWrite(spools[0], [b"L" * INLINE_BYTES], LabelSet(), 1.0),
                          GroupWrite(spools[1], [b"lost\n"], LabelSet(), 1.0)])
    assert all(isinstance(outcome, OSError) for outcome in failed)
    for spool, mark in zip(spools, marks):
        spool.rollback(mark)  # as the append task does
    for spool in spools:  # a round of one group: synced in place, over the failed group's place
        assert write_round([GroupWrite(spool, [b"two\n"], LabelSet(), 1.0)]) == [
            [hashlib.sha1(b"two\n").hexdigest()]]
    _after_power_cut(powercut, root, spools, log)
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes()[:found.fragment.end] == b"one\ntwo\n"
        assert found.fragment.end == len(b"one\ntwo\n")


def _one_logged_round(powercut) -> tuple[Path, CommitLog, list[Spool], list]:
    """On a file system that can lose power: a log, two spools with ``one\\n``
    logged in each, and their marks after it."""
    root = powercut.mount / "data"
    log = CommitLog.open(root)
    spools = logged_spools(log, 2)
    write_round([GroupWrite(s, [b"one\n"], LabelSet(), 1.0) for s in spools])
    return root, log, spools, [s.mark() for s in spools]


def _after_power_cut(powercut, root: Path, spools: list[Spool], log: CommitLog) -> int:
    """Stop (checkpoints under way finish), cut the power, restart: how many records
    the new log replayed."""
    for spool in spools:
        spool.close()
    log.close()
    powercut.cut()
    powercut.start()
    reopened = CommitLog.open(root)
    reopened.close()
    return reopened.replayed


def test_deferred_lines_land_in_place_and_a_removed_file_is_skipped(tmp_path):
    """`write_lines` (the helper thread's part of `CommitLog.defer`): lines in any
    order, adjacent ones in one write, each at its offset; a commits file removed
    meanwhile (its spool persisted) is nothing to write."""
    commits = tmp_path / "a.commits"
    commits.write_bytes(bytes(32))
    write_lines([(commits, 4, b"two\n"), (tmp_path / "gone.commits", 0, b"x\n"),
                 (commits, 20, b"far\n"), (commits, 0, b"one\n")])
    assert commits.read_bytes() == b"one\ntwo\n" + bytes(12) + b"far\n" + bytes(8)
    assert not (tmp_path / "gone.commits").exists()


def test_logged_lines_reach_their_files_by_flush(data_dir):
    """A logged round's commit lines wait in memory; `flush_lines` (a journal
    closing) writes them, and spools then recover from their own files with no
    replay. (Before a checkpoint they are written too: the power-cut test above
    fails otherwise.)"""
    root, opened = data_dir
    log = open_log(root, opened)
    spools = logged_spools(log, 3)
    for i in range(5):
        write_round([GroupWrite(s, [b"%d\n" % i], LabelSet(), 1.0) for s in spools])
    log.flush_lines()
    assert not log.lines_pending
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.fragment.end == 10


def test_a_streamed_group_in_a_logged_round_commits_its_own_sha1s(data_dir):
    # A body streamed into its spool (herald.fragment.spool_stream) may share a round
    # with other journals' groups, which then goes through the log: its commit line
    # must carry the SHA1s the stream computed, or recovery drops an acknowledged
    # append (the line's fragment SHA1 would not match the bytes) [I-APPEND-3].
    root, opened = data_dir
    log = open_log(root, opened)
    streamed, small = logged_spools(log, 2)
    for spool in (streamed, small):
        write_round([GroupWrite(spool, [b"first\n"], LabelSet(), 1.0)])  # files created and open
    body = bytes(range(256)) * (STREAM_MIN_BYTES // 256 + 3)
    assert streamed._pool.pin_if_open(streamed)
    try:
        stream = SpoolStream(streamed, len(body))
        for at in range(0, len(body), 100_000):
            stream.write(body[at:at + 100_000])
        writes = [stream.group_write(LabelSet(), 1.0), GroupWrite(small, [b"x\n"], LabelSet(), 1.0)]
        assert logged_to(writes) is log
        assert write_round(writes) == [[hashlib.sha1(body).hexdigest()], [hashlib.sha1(b"x\n").hexdigest()]]
    finally:
        streamed._pool.unpin(streamed)
    assert streamed.fragment().sum == hashlib.sha1(b"first\n" + body).hexdigest()
    streamed.close()
    log.close()
    open_log(root, opened)  # replays what the log holds (the deferred lines among it)
    (found,), _ = recover_spools(streamed.directory, streamed.journal, CompressionCodec.NONE)
    assert found.path.read_bytes() == b"first\n" + body  # the streamed append survives recovery


def test_a_logged_round_of_small_groups_builds_fragments_and_answers_while_it_syncs(data_dir):
    """A round whose spool copies are written during the log's fdatasync also builds,
    then, each spool's fragment as it is once committed and what its journal asked
    for (`GroupWrite.answer_ahead`): the very fragment the spool then serves, with
    the SHA1 of its bytes. A larger group, written before the sync, builds nothing
    ahead, and its spool's fragment is built as asked."""
    root, opened = data_dir
    log = open_log(root, opened)
    spools = logged_spools(log, 3)
    for round_number, bodies in enumerate([[b"one\n", b"two\n"], [b"three\n"], [b"L" * (200 << 10)]]):
        writes = [GroupWrite(s, bodies, LabelSet(), 1.0) for s in spools]
        for write in writes:
            write.answer_ahead = lambda w: (w.next_fragment, list(w.sums))
        outcomes = write_round(writes)
        ahead = round_number < 2  # the last round's group is not small (`PARALLEL_HASH_BYTES`)
        for spool, write, sums in zip(spools, writes, outcomes):
            content = spool.path.read_bytes()[:spool.end]
            fragment = spool.fragment()
            assert (fragment.begin, fragment.end) == (0, spool.end)
            assert fragment.sum == hashlib.sha1(content).hexdigest()
            assert spool.fragment() is fragment  # built once per commit
            if ahead:
                assert write.answers == (fragment, sums) and write.answers[0] is fragment
            else:
                assert write.answers is None and write.next_fragment is None


def test_logged_lines_are_left_to_the_log_even_where_their_commits_file_grows(data_dir):
    """A logged round's commit lines all go to the log, the ones that need their
    commits file preallocated further too (grown in the page cache, with no sync on
    the round), and a power cut before any checkpoint loses none: replay writes
    them past the growth that never reached the disk [I-FRAG-2]."""
    root, opened = data_dir
    log = open_log(root, opened)
    spools = logged_spools(log, 2)
    bodies = [b"%03d\n" % i for i in range(80)]  # ~80 lines of ~80 B: past the first 4 KiB
    for body in bodies:
        writes = [GroupWrite(s, [body], LabelSet(), 1.0) for s in spools]
        assert write_round(writes) == [[hashlib.sha1(body).hexdigest()]] * len(spools)
        assert all(write.deferred for write in writes)
    assert all(s._commits_allocated > 4096 for s in spools)
    for spool in spools:
        forget_unsynced(spool)
    log.close()
    open_log(root, opened)  # replays, then the spools recover
    for spool in spools:
        (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
        assert found.path.read_bytes() == b"".join(bodies)
