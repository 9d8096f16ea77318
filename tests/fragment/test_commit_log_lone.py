"""Rounds of one group (one writer): a small one is logged (one fdatasync), a
larger one, or any while the disk is slow or ``--lone-append-bytes`` is 0, syncs
in place; either way a power cut loses nothing acknowledged [I-APPEND-3, I-FRAG-2]."""

from __future__ import annotations

import hashlib

from herald.fragment.commit_log import LOG_DIR, LONE_BYTES
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import logged_to, round_syncs, write_round
from herald.protocol.labels import LabelSet
from tests.fragment.logged_spools import logged_spools, open_log, replayed_after_power_cut


def test_a_round_of_one_small_group_is_logged_and_survives_a_power_cut(data_dir):
    """One small group (one writer): once the segment has room, one fdatasync of the
    log, none in place (the first, with no room yet, syncs in place and asks for
    growth: a full disk never fails it); after a power cut (its spool and commits
    file never synced) replay brings back every acknowledged group [I-APPEND-3, I-FRAG-2]."""
    root, opened = data_dir
    log = open_log(root, opened)
    (spool,) = logged_spools(log, 1)
    first = [GroupWrite(spool, [b"first\n"], LabelSet(), 1.0)]
    assert logged_to(first) is None  # a fresh segment has no room: in place, and growth is asked
    write_round(first)
    log.drain()
    first_line = spool.commits_path.read_bytes().split(b"\n", 1)[0] + b"\n"  # synced in place
    groups = [[b"first\n"], [b"alone\n"], [b"again\n", b"and again\n"], [b"x" * (LONE_BYTES - 1)]]
    for group in groups[1:]:
        writes = [GroupWrite(spool, group, LabelSet(), 1.0)]
        assert logged_to(writes) is log and round_syncs(writes) == (0, 0)
        assert write_round(writes) == [[hashlib.sha1(b).hexdigest() for b in group]]
    found = replayed_after_power_cut(root, opened, log, spool, b"first\n", first_line)
    expected = b"".join(b"".join(group) for group in groups)
    assert found.path.read_bytes() == expected and found.fragment.end == len(expected)


def test_a_round_of_one_larger_group_syncs_in_place(data_dir):
    """One group of `LONE_BYTES` or more (many writers on one journal): its two
    fdatasyncs run side by side, and the log never sees its bytes."""
    root, opened = data_dir
    (spool,) = logged_spools(open_log(root, opened), 1)
    group = [b"alone\n" + b"y" * LONE_BYTES]
    writes = [GroupWrite(spool, group, LabelSet(), 1.0)]
    assert logged_to(writes) is None and round_syncs(writes) == (2, 0)
    write_round(writes)
    assert b"alone" not in b"".join(p.read_bytes() for p in (root / LOG_DIR).iterdir())


def test_a_lone_round_on_a_slow_disk_syncs_in_place_until_the_disk_is_quick_again(data_dir):
    """Once the log's fdatasyncs average slow (`CommitLog.sync_average`, a contended
    disk), a lone small round syncs in place (two syncs at once return sooner
    there); once the average is quick again it is logged again. Either way what
    is acknowledged is what a replay after a power cut gives back [I-FRAG-2]."""
    root, opened = data_dir
    log = open_log(root, opened)
    (spool,) = logged_spools(log, 1)
    write_round([GroupWrite(spool, [b"first\n"], LabelSet(), 1.0)])  # in place: the segment grows
    log.drain()
    for _ in range(200):  # as after many slow syncs
        log.sync_average.add(0.01)
    slow = [GroupWrite(spool, [b"slow\n"], LabelSet(), 1.0)]
    assert logged_to(slow) is None and round_syncs(slow) == (2, 0)
    assert write_round(slow) == [[hashlib.sha1(b"slow\n").hexdigest()]]
    synced = spool.commits_path.read_bytes()  # both lines synced in place
    for _ in range(400):  # as after many quick rounds in place (write_round times them)
        log.sync_average.add(0.0001)
    quick = [GroupWrite(spool, [b"quick\n"], LabelSet(), 1.0)]
    assert logged_to(quick) is log and round_syncs(quick) == (0, 0)
    assert write_round(quick) == [[hashlib.sha1(b"quick\n").hexdigest()]]
    found = replayed_after_power_cut(root, opened, log, spool, b"first\nslow\n", synced)
    assert found.path.read_bytes() == b"first\nslow\nquick\n"


def test_a_log_opened_with_lone_bytes_zero_never_takes_a_round_of_one_group(data_dir):
    """``lone_bytes=0`` (``herald serve --lone-append-bytes 0``): every round of one
    group syncs in place, however small and however much room the segment has;
    rounds of two groups are still logged."""
    root, opened = data_dir
    log = open_log(root, opened, lone_bytes=0)
    spools = logged_spools(log, 2)
    for _ in range(3):  # the first round of two asks for growth: later ones find room
        one = [GroupWrite(spools[0], [b"one\n"], LabelSet(), 1.0)]
        assert logged_to(one) is None and round_syncs(one) == (2, 0)
        write_round(one)
        log.drain()
        two = [GroupWrite(s, [b"two\n"], LabelSet(), 1.0) for s in spools]
        assert logged_to(two) is log
        write_round(two)
    assert not log.takes_lone(1)


def test_a_lone_round_kept_in_place_by_a_slow_log_is_timed_into_its_average_and_larger_ones_are_not(data_dir):
    """`write_round` times a small lone round the log declined (its syncs average
    slow) into the log's `sync_average`: the only way the log learns that the disk
    is quick again. A lone group too large for the log, and a logged round, add
    only the log's own fdatasyncs (none, for the large one)."""
    root, opened = data_dir
    log = open_log(root, opened)
    (spool,) = logged_spools(log, 1)
    log.sync_average.slow, log.sync_average.seconds = True, 0.0
    large = [GroupWrite(spool, [b"y" * LONE_BYTES], LabelSet(), 1.0)]
    write_round(large)
    assert log.sync_average.seconds == 0.0  # not the log's to judge: never logged, however quick
    small = [GroupWrite(spool, [b"small\n"], LabelSet(), 1.0)]
    assert logged_to(small) is None
    write_round(small)
    assert log.sync_average.seconds > 0.0
