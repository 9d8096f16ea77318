"""The journal index: local spools, persisted fragments and store listings (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from herald.fragment.index import Index
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

SUM = "ab" * 20


def frag(begin: int, end: int, store: str = "", mod_time: float = 0) -> Fragment:
    return Fragment("a/journal", begin, end, SUM, CompressionCodec.SNAPPY, store, mod_time)


def test_a_listing_older_than_an_upload_does_not_drop_the_uploaded_fragment():
    index = Index()
    index.add_local(frag(0, 10), Path("/spool/0"))
    index.add_local(frag(10, 20), Path("/spool/10"))
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
    index.add_local(frag(20, 30), Path("/spool/20"))  # rolled forward past [10, 20)
    assert index.locate(10, now_unix=200.0) is None
    assert index.has_hole_below(30)


# -- Gazette's own index test table (broker/fragment/index_test.go), against Herald --------

BASE = 1_500_000_000.0
LATER = BASE + 6 * 3600 + 1  # past the 6 h offset-jump horizon


def test_local_and_remote_fragments_answer_reads_in_their_ranges():
    index = Index()
    index.replace_remote([frag(100, 150, "file:///", BASE), frag(150, 200, "file:///", BASE)])
    index.add_local(frag(200, 250), Path("/spool/200"))
    assert index.locate(110, BASE).fragment == frag(100, 150, "file:///", BASE)
    located = index.locate(210, BASE)
    assert (located.fragment, located.local_path) == (frag(200, 250), Path("/spool/200"))
    assert index.end_offset == 250


def test_a_listing_covering_a_local_fragment_replaces_it_with_the_persisted_copies():
    index = Index()
    index.add_local(frag(100, 200), Path("/spool/100"))
    index.replace_remote([frag(100, 150, "file:///", BASE), frag(150, 200, "file:///", BASE)])
    assert index.fragments() == [frag(100, 150, "file:///", BASE), frag(150, 200, "file:///", BASE)]
    assert index.locate(110, BASE).fragment.mod_time == BASE


def test_a_read_before_a_local_only_first_fragment_waits_until_it_is_persisted():
    index = Index()
    index.add_local(frag(100, 200), Path("/spool/100"))
    assert index.locate(0, LATER) is None  # a replica may still upload [0, 100)
    index.replace_remote([frag(100, 200, "file:///", BASE), frag(200, 300, "file:///", BASE)])
    located = index.locate(0, BASE)
    assert (located.offset, located.fragment.begin, located.fragment.mod_time) == (100, 100, BASE)


@pytest.mark.parametrize("offset, now, expected", [
    (110, BASE, 100),      # inside the first fragment
    (210, BASE, None),     # the missing middle: wait
    (310, BASE, 300),      # inside the last fragment
    (250, BASE, None),     # persisted recently: still wait
    (250, LATER, 300),     # persisted over 6 h ago: jump to the next fragment
    (400, LATER, None),    # at the write head
])
def test_missing_middle_is_waited_on_until_the_next_fragment_is_old(offset, now, expected):
    index = Index()
    index.add_local(frag(100, 200), Path("/spool/100"))
    index.add_local(frag(300, 400), Path("/spool/300"))
    index.replace_remote([frag(100, 200, "file:///", BASE), frag(300, 400, "file:///", BASE)])
    located = index.locate(offset, now)
    assert (located.fragment.begin if located else None) == expected


def test_a_local_only_fragment_after_a_hole_is_never_jumped_to():
    index = Index()
    index.add_local(frag(100, 200), Path("/spool/100"))
    index.add_local(frag(300, 400), Path("/spool/300"))
    assert index.locate(250, LATER) is None  # no mod times: nothing says the hole is old
    assert index.locate(310, LATER).fragment.begin == 300


def test_a_fragment_filling_the_hole_is_served_once_committed():
    index = Index()
    index.replace_remote([frag(100, 200, "file:///", BASE), frag(300, 400, "file:///", BASE)])
    index.add_local(frag(200, 250), Path("/spool/200"))
    located = index.locate(210, BASE)
    assert (located.offset, located.fragment) == (210, frag(200, 250))
