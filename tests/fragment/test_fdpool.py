"""The spool descriptor pool: bounded, LRU, never closing a pinned spool, and a clear
error (not a broken spool) when the process runs out of descriptors."""

from __future__ import annotations

import os
import resource

import pytest

from herald.fragment.fdpool import DescriptorPool, DescriptorsExhaustedError
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.protocol.errors import HTTP_CODES, Status
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _spool(tmp_path, name: str, pool: DescriptorPool, registers: LabelSet = LabelSet()) -> Spool:
    return Spool(tmp_path / name, name, 0, CompressionCodec.NONE, registers, pool=pool)


def _recovered_content(spool: Spool) -> bytes:
    (found,), _registers = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    return found.path.read_bytes()


def test_idle_spool_without_registers_creates_no_files_and_holds_no_descriptors(tmp_path):
    pool = DescriptorPool(budget_fds=8)
    before = _open_fds()
    spool = _spool(tmp_path, "idle", pool)
    assert not spool.path.exists() and not spool.commits_path.exists()
    assert _open_fds() == before
    assert pool.statistics()["open_fds"] == 0


def test_spool_with_registers_records_them_at_once(tmp_path):
    pool = DescriptorPool(budget_fds=8)
    spool = _spool(tmp_path, "regs", pool, LabelSet.from_list([{"name": "owner", "value": "a"}]))
    _found, registers = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    assert registers == spool.registers


def test_many_spools_hold_at_most_the_budget_and_evicted_ones_reopen(tmp_path):
    pool = DescriptorPool(budget_fds=8)
    before = _open_fds()
    spools = [_spool(tmp_path, f"j{i}", pool) for i in range(20)]
    for i, spool in enumerate(spools):
        spool.append_group([f"first {i}\n".encode()], LabelSet(), 0.0)
    assert _open_fds() - before <= 8
    assert pool.statistics()["evictions"] >= 16
    spools[0].append_group([b"second\n"], LabelSet(), 0.0)  # evicted long ago: reopened
    assert _open_fds() - before <= 8
    assert _recovered_content(spools[0]) == b"first 0\nsecond\n"
    assert [_recovered_content(s) for s in spools[1:]] == [f"first {i}\n".encode() for i in range(1, 20)]


def test_a_pinned_spool_keeps_its_descriptors_while_others_need_room(tmp_path):
    pool = DescriptorPool(budget_fds=2)  # room for one spool
    busy, other = _spool(tmp_path, "busy", pool), _spool(tmp_path, "other", pool)
    with busy.holding_descriptors():
        fd = busy._fd
        other.append_group([b"other\n"], LabelSet(), 0.0)  # over budget: busy is pinned
        assert busy._fd == fd
        os.fstat(fd)  # still ours, still open
        busy.write(b"busy\n")
        busy.sync_data()
    busy.commit(LabelSet(), 0.0)
    assert pool.statistics()["open_fds"] <= 2
    assert _recovered_content(busy) == b"busy\n"


def test_pin_if_open_pins_only_open_descriptors_and_never_opens(tmp_path):
    pool = DescriptorPool(budget_fds=4)
    spool, other = _spool(tmp_path, "spool", pool), _spool(tmp_path, "other", pool)
    assert not pool.pin_if_open(spool)  # never written: nothing open, nothing opened
    spool.append_group([b"first\n"], LabelSet(), 0.0)
    assert pool.pin_if_open(spool)  # open now: pinned without blocking
    other.append_group([b"other\n"], LabelSet(), 0.0)  # over budget: the pinned one stays
    assert spool._fd >= 0 and pool.statistics()["pinned_holders"] == 1
    pool.unpin(spool)
    assert pool.statistics()["pinned_holders"] == 0
    _spool(tmp_path, "third", pool).append_group([b"third\n"], LabelSet(), 0.0)
    assert spool._fd == -1  # unpinned and least recently used: evicted
    assert not pool.pin_if_open(spool)  # closed: refused, not reopened
    assert spool._fd == -1


def test_closed_spool_releases_its_descriptors_for_good(tmp_path):
    pool = DescriptorPool(budget_fds=8)
    spool = _spool(tmp_path, "closed", pool)
    spool.append_group([b"x\n"], LabelSet(), 0.0)
    spool.close()
    assert pool.statistics()["open_fds"] == 0
    assert spool._fd == -1 and spool._commits_fd == -1


@pytest.fixture
def descriptors_nearly_exhausted():
    """Lower this process's soft limit to just above what it holds, then fill the
    rest: the next open fails with EMFILE. Yields the fillers; restores everything."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fillers: list[int] = []
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 16, hard))
    try:
        while True:
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        yield fillers
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_out_of_descriptors_answers_resource_exhausted_and_the_spool_recovers(tmp_path,
                                                                             descriptors_nearly_exhausted):
    pool = DescriptorPool(budget_fds=8)
    spool = _spool(tmp_path, "starved", pool)
    with pytest.raises(DescriptorsExhaustedError) as caught:
        spool.append_group([b"refused\n"], LabelSet(), 0.0)
    assert caught.value.status is Status.RESOURCE_EXHAUSTED and HTTP_CODES[caught.value.status] == 503
    assert "ulimit -n" in caught.value.message
    for fd in descriptors_nearly_exhausted[:8]:
        os.close(fd)
    del descriptors_nearly_exhausted[:8]
    spool.append_group([b"accepted\n"], LabelSet(), 0.0)
    assert _recovered_content(spool) == b"accepted\n"


def test_pin_many_pins_each_holder_that_opens_and_names_the_error_of_each_that_does_not(tmp_path):
    """A sync round pins every group's spool under one hold of the lock: each pin
    counts as `pin`'s would (nothing pinned is closed to stay within the budget),
    and a spool whose files are gone fails alone."""
    pool = DescriptorPool(budget_fds=4)
    spools = [_spool(tmp_path, f"s{i}", pool) for i in range(3)]
    for spool in spools:
        spool.append_group([b"x\n"], LabelSet(), 1.0)
    pool.shed_idle()
    spools[1].path.unlink()
    errors = pool.pin_many(spools)
    assert errors[0] is None and errors[2] is None and isinstance(errors[1], FileNotFoundError)
    assert pool.statistics()["pinned_holders"] == 2 and pool.statistics()["open_fds"] == 4
    spools[0].append_group([b"y\n"], LabelSet(), 1.0)  # a pinned spool writes as usual
    pool.unpin_many([spools[0], spools[2]])
    assert pool.statistics()["pinned_holders"] == 0
    assert _recovered_content(spools[0]) == b"x\ny\n"
