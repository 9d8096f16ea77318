"""The journal index: local spools, persisted fragments and store listings (pure)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from herald.fragment.index import Index
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

SUM = "ab" * 20


def frag(begin: int, end: int, store: str = "", mod_time: float = 0) -> Fragment:
    return Fragment("a/journal", begin, end, SUM, CompressionCodec.SNAPPY, store, mod_time)


def spool(begin: int) -> Path:
    return Path(f"/spool/{begin}")


def test_a_listing_older_than_an_upload_does_not_drop_the_uploaded_fragment():
    index = Index()
    index.add_local(frag(0, 10), spool(0))
    index.add_local(frag(10, 20), spool(10))
    stale_listing = []  # taken before the upload of [0, 10) finished
    index.add_remote(frag(0, 10, "file:///", 1.0))  # the persister finished...
    index.drop_local(0)  # ...and deleted the spool file
    index.replace_remote(stale_listing)
    located = index.locate(0, now_unix=2.0)
    assert located is not None and located.offset == 0 and located.fragment.store == "file:///"


def test_a_pruned_fragment_leaves_the_index_and_reads_jump_past_it():
    index = Index()
    old, new = frag(0, 10, "file:///", 1.0), frag(10, 20, "file:///", 2.0)
    for f in (old, new):
        index.add_remote(f)
    index.forget(old)
    index.replace_remote([new])
    assert index.locate(0, now_unix=3.0).offset == 10  # before the first fragment: jump


def test_a_hole_between_recent_fragments_is_waited_on_not_skipped():
    index = Index()
    index.add_remote(frag(0, 10, "file:///", 100.0))
    index.add_local(frag(20, 30), spool(20))  # rolled forward past [10, 20)
    assert index.locate(10, now_unix=200.0) is None
    assert index.has_hole_below(30)


# -- Gazette's own index test table (broker/fragment/index_test.go), against Herald --------
#
# Each scenario builds an index as one of Gazette's tests does; each case queries it at
# an offset and a time and expects a fragment — (read offset, begin, end, mod time,
# whether a local file serves it) — or None: the read waits (a non-blocking one answers
# OFFSET_NOT_YET_AVAILABLE). A remote fragment here always has a mod time: Herald's
# listings carry one, where Gazette's tests sometimes leave it zero.

BASE = 1_500_000_000.0
LATER = BASE + 6 * 3600 + 1  # past the 6 h offset-jump horizon
STORE = "file:///"


def remote(begin: int, end: int, mod_time: float = BASE) -> Fragment:
    return frag(begin, end, STORE, mod_time)


def simple_remote_and_local(index: Index) -> None:  # TestSimpleRemoteAndLocalQueries
    index.replace_remote([remote(100, 150), remote(150, 200)])
    index.add_local(frag(200, 250), spool(200))


def remote_replaces_local(index: Index) -> None:  # TestRemoteReplacesLocal
    index.add_local(frag(100, 200), spool(100))
    index.replace_remote([remote(100, 150), remote(150, 200)])


def local_only_after_byte_zero(index: Index) -> None:  # TestQueryAtMissingByteZero, before
    index.add_local(frag(100, 200), spool(100))


def persisted_after_byte_zero(index: Index) -> None:  # TestQueryAtMissingByteZero, after
    index.add_local(frag(100, 200), spool(100))
    index.replace_remote([remote(100, 200), remote(200, 300, 0)])


def local_only_missing_middle(index: Index) -> None:  # TestQueryAtMissingMiddle, zero ModTimes
    index.add_local(frag(100, 200), spool(100))
    index.add_local(frag(300, 400), spool(300))


def persisted_missing_middle(index: Index) -> None:  # TestQueryAtMissingMiddle, ModTime = base
    local_only_missing_middle(index)
    index.replace_remote([remote(100, 200), remote(300, 400)])


def missing_middle_filled(index: Index) -> None:  # TestQueryAtMissingMiddle, [200, 250) commits
    persisted_missing_middle(index)
    index.add_local(frag(200, 250), spool(200))


def remote_at_head(index: Index) -> None:  # TestQueryAtHead
    index.add_local(frag(100, 200), spool(100))


WAIT = None
GAZETTE_TABLE: list[tuple[Callable[[Index], None], int, float, tuple | None]] = [
    (simple_remote_and_local, 110, BASE, (110, 100, 150, BASE, False)),
    (simple_remote_and_local, 210, BASE, (210, 200, 250, 0, True)),
    (simple_remote_and_local, 250, BASE, WAIT),  # the write head
    # The listing covers the local fragment with two smaller ones: the persisted copies
    # replace it, file and all — local copies never shadow persisted ones.
    (remote_replaces_local, 110, BASE, (110, 100, 150, BASE, False)),
    (remote_replaces_local, 160, BASE, (160, 150, 200, BASE, False)),
    (remote_replaces_local, 0, BASE, (100, 100, 150, BASE, False)),
    # Before a local-only first fragment: a replica may still upload [0, 100), so wait —
    # however long — and never skip to the local fragment.
    (local_only_after_byte_zero, 0, BASE, WAIT),
    (local_only_after_byte_zero, 0, LATER, WAIT),
    (local_only_after_byte_zero, 150, BASE, (150, 100, 200, 0, True)),
    # Once persisted (however recently), the first fragment is jumped to at once.
    (persisted_after_byte_zero, 0, BASE, (100, 100, 200, BASE, False)),
    (persisted_after_byte_zero, 50, BASE, (100, 100, 200, BASE, False)),
    (persisted_after_byte_zero, 250, BASE, (250, 200, 300, 0, False)),
    # A hole before a local-only fragment is waited on forever.
    (local_only_missing_middle, 110, BASE, (110, 100, 200, 0, True)),
    (local_only_missing_middle, 210, BASE, WAIT),
    (local_only_missing_middle, 250, LATER, WAIT),
    (local_only_missing_middle, 310, LATER, (310, 300, 400, 0, True)),
    # A hole before a persisted fragment: wait while it is young, jump once it is old.
    (persisted_missing_middle, 110, BASE, (110, 100, 200, BASE, False)),
    (persisted_missing_middle, 210, BASE, WAIT),
    (persisted_missing_middle, 250, BASE, WAIT),
    (persisted_missing_middle, 250, LATER, (300, 300, 400, BASE, False)),
    (persisted_missing_middle, 310, BASE, (310, 300, 400, BASE, False)),
    (persisted_missing_middle, 400, LATER, WAIT),  # the write head
    # A fragment filling (part of) the hole is served once committed.
    (missing_middle_filled, 210, BASE, (210, 200, 250, 0, True)),
    (missing_middle_filled, 250, BASE, WAIT),
    (missing_middle_filled, 250, LATER, (300, 300, 400, BASE, False)),
    (remote_at_head, 200, LATER, WAIT),
]


@pytest.mark.parametrize("scenario, offset, now, expected", GAZETTE_TABLE,
                         ids=[f"{s.__name__}@{o}{'+6h' if n == LATER else ''}" for s, o, n, _ in GAZETTE_TABLE])
def test_gazette_index_table(scenario, offset, now, expected):
    index = Index()
    scenario(index)
    located = index.locate(offset, now)
    got = None if located is None else (
        located.offset, located.fragment.begin, located.fragment.end, located.fragment.mod_time,
        located.local_path is not None)
    assert got == expected


def test_a_blocked_read_at_250_jumps_once_the_next_fragment_ages_past_the_horizon():
    # The broker re-asks on every index update (commit, listing, persist): the same
    # read waits at first, then jumps — it never skips early and never waits forever.
    index = Index()
    persisted_missing_middle(index)
    asked = [index.locate(250, now) for now in (BASE, BASE + 3600, LATER)]
    assert asked[:2] == [None, None] and asked[2].offset == 300


def test_a_recovered_spool_already_persisted_does_not_shadow_the_persisted_copy():
    # The broker died between upload and delete: the listing shows the fragment, and
    # recovery finds its spool too. The persisted copy, with its mod time, stays.
    index = Index()
    index.replace_remote([remote(100, 200)])
    index.add_local(frag(100, 200), spool(100))
    assert index.fragments() == [remote(100, 200)]
    located = index.locate(0, BASE)
    assert (located.offset, located.fragment, located.local_path) == (100, remote(100, 200), None)


def test_a_listing_covering_only_part_of_a_local_fragment_keeps_it():
    index = Index()
    index.add_local(frag(100, 300), spool(100))
    index.replace_remote([remote(100, 150), remote(200, 300)])  # [150, 200) not listed
    located = index.locate(160, BASE)
    assert (located.fragment, located.local_path) == (frag(100, 300), spool(100))


def test_a_growing_spool_at_the_head_stays_local():
    index = Index()
    index.replace_remote([remote(0, 100)])
    for end in (110, 120):
        index.add_local(frag(100, end), spool(100))
    assert index.fragments() == [remote(0, 100), frag(100, 120)]
    assert index.locate(115, BASE).local_path == spool(100)


def test_a_growing_spool_over_a_persisted_copy_of_its_start_replaces_it():
    """The spool's fast path (`CoverSet.grow_last`) also grows past a persisted
    fragment of the same begin, as `add` always did: the spool holds more."""
    index = Index()
    index.replace_remote([remote(0, 100), remote(100, 110)])
    index.add_local(frag(100, 120), spool(100))
    assert index.fragments() == [remote(0, 100), frag(100, 120)]
    assert index.locate(115, BASE).local_path == spool(100)
