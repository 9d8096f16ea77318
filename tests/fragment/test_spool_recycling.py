"""Spool files reused: a persisted spool's file serves a later spool, its
old bytes never reaching a reader, a recovery or a store, and never reused while a
reader still holds it open."""

from __future__ import annotations

import os

from herald.fragment.fdpool import DescriptorPool
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_recycling import FREE_SUFFIX, KEEP, MIN_BYTES, kept_dir, retire, take
from herald.protocol.fragment import CompressionCodec
from herald.protocol.labels import LabelSet

OLD = b"o" * (2 * MIN_BYTES)


def _persisted_spool(directory, begin: int) -> Spool:
    """A rolled spool holding `OLD`, as the persister leaves it before removal."""
    spool = Spool(directory, "j", begin, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(16))
    spool.append_group([OLD], LabelSet(), 1.0)
    spool.close()
    return spool


def _free_files(directory) -> list[str]:
    """The files kept for ``directory``'s spools, and its neighbours'."""
    return sorted(p.name for p in kept_dir(directory).glob(f"*{FREE_SUFFIX}"))


def test_a_retired_file_becomes_the_next_spool_and_its_old_bytes_never_show(tmp_path):
    old = _persisted_spool(tmp_path / "j", 0)
    retire(old.path)
    assert not old.path.exists() and len(_free_files(old.directory)) == 1
    spool = Spool(old.directory, "j", len(OLD), CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(16))
    spool.append_group([b"new\n"], LabelSet(), 2.0)
    assert _free_files(old.directory) == []
    assert spool.path.stat().st_size == len(OLD)  # the old blocks, overwritten in place
    (found,), _ = recover_spools(spool.directory, "j", CompressionCodec.NONE)  # as after kill -9
    assert found.fragment.end == len(OLD) + 4 and found.path.read_bytes() == b"new\n"
    spool.append_group([b"more\n"], LabelSet(), 2.0)
    spool.close()  # rolled: the file is cut to the fragment before it is persisted
    assert spool.path.read_bytes() == b"new\nmore\n"


def test_a_spool_reused_before_its_first_commit_recovers_empty(tmp_path):
    old = _persisted_spool(tmp_path / "j", 0)
    retire(old.path)
    spool = Spool(old.directory, "j", len(OLD), CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(16))
    spool.sync_data()  # files created (from the kept one), nothing committed
    assert recover_spools(spool.directory, "j", CompressionCodec.NONE) == ([], LabelSet())
    assert not spool.path.exists()


def test_a_file_a_reader_holds_open_is_deleted_not_reused(tmp_path):
    old = _persisted_spool(tmp_path / "j", 0)
    reader = os.open(old.path, os.O_RDONLY)
    try:
        retire(old.path)
        assert not old.path.exists() and _free_files(old.directory) == []
        assert not list(old.directory.glob("*.retiring"))
        assert os.pread(reader, 8, 0) == OLD[:8]  # the reader's bytes stay the old ones
    finally:
        os.close(reader)


def test_small_files_and_files_beyond_keep_are_deleted(tmp_path):
    directory = tmp_path / "j"
    small = Spool(directory, "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(16))
    small.append_group([b"tiny\n"], LabelSet(), 1.0)
    small.close()
    retire(small.path)
    assert not small.path.exists() and _free_files(directory) == []
    spools = [_persisted_spool(directory, begin * len(OLD)) for begin in range(KEEP + 1)]
    for spool in spools:
        retire(spool.path)
    assert len(_free_files(directory)) == KEEP
    assert not list(directory.glob("*.spool"))


def test_a_file_kept_from_one_journal_serves_another(tmp_path):
    old = _persisted_spool(tmp_path / "a", 0)
    retire(old.path)
    spool = Spool(tmp_path / "b", "b", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(16))
    spool.append_group([b"b\n"], LabelSet(), 1.0)
    assert _free_files(spool.directory) == [] and spool.path.stat().st_size == len(OLD)
    (found,), _ = recover_spools(spool.directory, "b", CompressionCodec.NONE)
    assert found.path.read_bytes() == b"b\n"


def test_an_existing_spool_file_is_never_replaced(tmp_path):
    old = _persisted_spool(tmp_path / "a", 0)
    retire(old.path)
    existing = tmp_path / "b" / "0000000000000000.spool"
    existing.parent.mkdir()
    existing.write_bytes(b"kept\n")
    assert take(existing.parent, existing) == 0
    assert existing.read_bytes() == b"kept\n" and len(_free_files(existing.parent)) == 1
