"""A large group's SHA1s run beside its write: exact sums, and a refused write
changes nothing of the fragment's running SHA1."""

from __future__ import annotations

import errno
import hashlib
import random
import resource

from herald.fragment.fdpool import DescriptorPool
from herald.fragment.group_write import GroupWrite
from herald.fragment.rounds import write_round
from herald.fragment.spool import Spool
from herald.fragment.spool_recovery import recover_spools
from herald.fragment.spool_stream import StreamSums
from herald.fragment.spool_sums import PARALLEL_HASH_BYTES
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet


def _sums(contents: list[bytes]) -> list[str]:
    return [hashlib.sha1(content).hexdigest() for content in contents]


def test_a_large_groups_sums_are_exact_and_a_refused_write_keeps_the_running_sum(tmp_path):
    """Groups from PARALLEL_HASH_BYTES have their SHA1s started before the write; a
    write the kernel refuses (EFBIG past RLIMIT_FSIZE) leaves the fragment's running
    SHA1 as it was, so the next group's commit record and the fragment's name are right."""
    spool = Spool(tmp_path / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    first = [bytes([i]) * (PARALLEL_HASH_BYTES // 2) for i in range(3)]
    assert write_round([GroupWrite(spool, first, LabelSet(), 1.0)]) == [_sums(first)]
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (spool.end + 4096, limit[1]))  # Python ignores SIGXFSZ
    try:
        (refused,) = write_round([GroupWrite(spool, [b"r" * PARALLEL_HASH_BYTES], LabelSet(), 1.0)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    assert isinstance(refused, OSError) and refused.errno == errno.EFBIG
    assert spool.pending_sha1_hex() == hashlib.sha1(b"".join(first)).hexdigest()
    last = [b"z" * PARALLEL_HASH_BYTES]
    assert write_round([GroupWrite(spool, last, LabelSet(), 1.0)]) == [_sums(last)]
    content = b"".join(first + last)
    assert spool.fragment().sum == hashlib.sha1(content).hexdigest()
    spool.close()
    (found,), _ = recover_spools(spool.directory, spool.journal, CompressionCodec.NONE)
    assert found.path.read_bytes() == content and found.fragment.sum == spool.fragment().sum


def test_a_group_written_after_a_rollback_is_summed_from_the_mark(tmp_path):
    """A large group written but rolled back (its sync failed, say) is forgotten by
    the running SHA1, though its hashing ran on threads."""
    spool = Spool(tmp_path / "j", "j", 0, CompressionCodec.NONE, LabelSet(), pool=DescriptorPool(budget_fds=8))
    kept = [b"k" * PARALLEL_HASH_BYTES]
    write_round([GroupWrite(spool, kept, LabelSet(), 1.0)])
    mark = spool.mark()
    with spool.holding_descriptors():
        assert spool.write_pending([b"x" * PARALLEL_HASH_BYTES]) == _sums([b"x" * PARALLEL_HASH_BYTES])
    spool.rollback(mark)
    last = [b"y" * PARALLEL_HASH_BYTES]
    write_round([GroupWrite(spool, last, LabelSet(), 1.0)])
    assert spool.fragment().sum == hashlib.sha1(kept[0] + last[0]).hexdigest()


def test_a_streamed_bodys_sums_take_every_piece_in_order_however_they_arrive():
    """`StreamSums` hashes pieces on helper threads, taking those fed while it hashes
    together: whatever the sizes and pace, both sums are the one-pass SHA1s, and the
    spool's running SHA1 it started from is left as it was."""
    rng = random.Random(14)
    before = hashlib.sha1(b"the fragment so far")
    for _ in range(200):
        pieces = [rng.randbytes(rng.choice((1, 100, 4096, 200_000))) for _ in range(rng.randint(1, 12))]
        sums = StreamSums(before)
        for piece in pieces:
            sums.update(piece)
        running, body = sums.result()
        whole = b"".join(pieces)
        assert body == hashlib.sha1(whole).hexdigest()
        assert running.hexdigest() == hashlib.sha1(b"the fragment so far" + whole).hexdigest()
    assert before.hexdigest() == hashlib.sha1(b"the fragment so far").hexdigest()
