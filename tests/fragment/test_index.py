"""The journal index: local spools, persisted fragments and store listings (pure)."""

from __future__ import annotations

from pathlib import Path

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
