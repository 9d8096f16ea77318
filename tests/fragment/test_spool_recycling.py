"""Spool files reused: a persisted spool's file serves a later spool, its
old bytes never reaching a reader, a recovery or a store, and never reused while a
reader still holds it open."""

from __future__ import annotations

import os
from urllib.parse import quote

from herald.fragment.fdpool import DescriptorPool
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_recycling import FREE_SUFFIX, KEEP, KEPT_DIR, MIN_BYTES, kept_dir, retire, sweep, take
from herald.protocol.fragment import CompressionCodec
from herald.protocol.labels import LabelSet
from herald.testing import apply_specs, journal_spec

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
        assert not list(old.directory.parent.glob("**/*.retiring"))
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


def _crash_leftovers(kept, live_spool) -> None:
    """In ``kept``, what crashes leave: a retire killed between its renames, a take
    whose rename a power cut left durable at both names (a live spool's file, sorted
    first), a small file, and persisters that raced past `KEEP`."""
    kept.mkdir(exist_ok=True)
    (kept / "7.retiring").write_bytes(OLD)
    os.link(live_spool, kept / "0.free")
    (kept / "00.free").write_bytes(b"short")
    for n in range(1, KEEP + 2):
        (kept / f"{n}.free").write_bytes(OLD)


def test_the_sweep_leaves_only_files_ready_for_a_spool(tmp_path):
    live = _persisted_spool(tmp_path / "j", 0)  # stands for a live spool: its file must never be taken
    _crash_leftovers(kept_dir(live.directory), live.path)
    assert sweep(tmp_path) == 4
    assert _free_files(live.directory) == [f"{n}.free" for n in range(1, KEEP + 1)]
    assert sorted(p.name for p in kept_dir(live.directory).iterdir()) == _free_files(live.directory)
    assert live.path.stat().st_nlink == 1 and live.path.read_bytes() == OLD
    assert sweep(tmp_path) == 0 and sweep(tmp_path / "none") == 0


def test_a_broker_restarted_over_crash_leftovers_sweeps_them_and_serves(broker_factory, tmp_path):
    """A real broker killed (kill -9) with a live spool, and the kept files a crash
    leaves beside it: the restart removes every leftover before a spool is created,
    then a new journal's spool takes a kept file, and neither journal's bytes show
    in the other's [I-FRAG-2]. (The files are placed by hand: a kill -9 between
    two renames is too narrow to hit.)"""
    data = tmp_path / "data"
    broker = broker_factory(data)
    apply_specs(broker.url, *(journal_spec(f"recycled/{name}", length=64 << 20) for name in ("live", "new")))
    live = b"".join(b"%06d " % i + b"l" * 1000 + b"\n" for i in range(MIN_BYTES // 1000 + 8))
    with broker.client() as http:
        http.put("/recycled/live", content=live).raise_for_status()
    broker.kill()
    (live_spool,) = (data / "spools" / quote("recycled/live", safe="")).glob("*.spool")
    kept = data / "spools" / KEPT_DIR
    _crash_leftovers(kept, live_spool)
    broker.start()  # its recovered spool is then persisted, and deleted: KEEP files wait
    assert sorted(p.name for p in kept.iterdir()) == [f"{n}.free" for n in range(1, KEEP + 1)]
    with broker.client() as http:
        http.put("/recycled/new", content=b"new\n").raise_for_status()
        (new_spool,) = (data / "spools" / quote("recycled/new", safe="")).glob("*.spool")
        assert new_spool.stat().st_size == len(OLD)  # a kept file, not the live spool's
        assert http.get("/recycled/new").content == b"new\n"
        assert http.get("/recycled/live").content == live


def test_a_kept_file_with_another_name_is_never_taken(tmp_path):
    """Even unswept (a leftover the sweep could not remove): `take` drops it."""
    live = _persisted_spool(tmp_path / "a", 0)
    kept_dir(live.directory).mkdir()
    os.link(live.path, kept_dir(live.directory) / "0.free")
    path = tmp_path / "b" / "0000000000000000.spool"
    path.parent.mkdir()
    assert take(path.parent, path) == 0 and not path.exists()
    assert live.path.stat().st_nlink == 1 and live.path.read_bytes() == OLD


def test_a_restart_sweeps_kept_files_an_older_version_left_in_journal_dirs(broker_factory, tmp_path):
    """The first version of spool recycling kept files in each journal's directory
    (``<ino>.retiring`` mid-retire, then ``<begin>.free``): a broker killed (kill -9)
    over a data dir it left them in must remove them at restart, not hold their disk
    for good, and serve the journal's bytes as before. (The files are placed by hand:
    today's code never writes these names there.)"""
    data = tmp_path / "data"
    broker = broker_factory(data)
    apply_specs(broker.url, journal_spec("recycled/old", length=64 << 20))
    with broker.client() as http:
        http.put("/recycled/old", content=b"acknowledged\n").raise_for_status()
    broker.kill()
    journal_dir = data / "spools" / quote("recycled/old", safe="")
    (live_spool,) = journal_dir.glob("*.spool")
    leftovers = [journal_dir / "123.retiring", journal_dir / "0000000000100000.free"]
    for path in leftovers:
        path.write_bytes(OLD)
    broker.start()
    assert [p.name for p in leftovers if p.exists()] == []
    with broker.client() as http:
        assert http.get("/recycled/old").content == b"acknowledged\n"
        http.put("/recycled/old", content=b"more\n").raise_for_status()
        assert http.get("/recycled/old").content == b"acknowledged\nmore\n"
