"""A replica's group write: the same fragment, commit line and recovery as a primary's
group write of the same bytes, without a body SHA1 nobody reads."""

from __future__ import annotations

import hashlib

import pytest

from herald.broker.replica import ReplicaWrite
from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_sums import PARALLEL_HASH_BYTES
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _spool(directory, pool: DescriptorPool) -> Spool:
    return Spool(directory, directory.name, 0, CompressionCodec.NONE, LabelSet(), pool=pool)


@pytest.mark.parametrize("size", [16 << 10, PARALLEL_HASH_BYTES + 1], ids=["small", "hashed-beside-the-write"])
def test_a_replica_write_commits_what_a_primary_write_commits(tmp_path, size):
    pool = DescriptorPool(budget_fds=64)
    primary, replica = _spool(tmp_path / "primary", pool), _spool(tmp_path / "replica", pool)
    groups = [b"a" * size, b"b\n" * 7]
    registers = LabelSet.parse("owner=x")
    for group in groups:  # the replica's one body is the primary's whole group
        (_, ) = write_round([GroupWrite(primary, [group[:5], group[5:]], registers, 1.0)])
        (_, ) = write_round([ReplicaWrite(replica, [group], registers, 1.0)])
        assert replica.fragment().sum == primary.fragment().sum == hashlib.sha1(
            b"".join(groups[:groups.index(group) + 1])).hexdigest()
    assert (replica.end, replica.registers) == (primary.end, primary.registers)
    for spool in (primary, replica):
        spool.close()
    (from_primary,), _ = recover_spools(primary.directory, primary.journal, CompressionCodec.NONE)
    (from_replica,), _ = recover_spools(replica.directory, replica.journal, CompressionCodec.NONE)
    assert from_replica.path.read_bytes() == from_primary.path.read_bytes() == b"".join(groups)
    assert (from_replica.fragment.end, from_replica.fragment.sum, from_replica.registers) == (
        from_primary.fragment.end, from_primary.fragment.sum, from_primary.registers)
