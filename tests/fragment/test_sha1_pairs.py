"""Two SHA1s of the same bytes in one pass (`herald.fragment.spool_sums`): exactly
hashlib's digests, however the bytes are cut and whatever each SHA1 already holds;
hashlib's own objects where the C extension is not built."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys

import pytest

from herald.fragment.spool_sums import PAIRED, GroupSums, hash_inline, new_sha1, seal_inline, update_both

DATA = os.urandom(300_000)
CUTS = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 2047, 2048, 4096, 70_000]


@pytest.mark.parametrize("seed", range(40))
def test_update_both_matches_hashlib_for_any_cuts_and_head_starts(seed):
    """The running SHA1 holds a partial block of its own (any length), the body's
    starts empty: their blocks sit at different offsets of each piece."""
    rnd = random.Random(seed)
    running, expected_running = new_sha1(), hashlib.sha1()
    head = DATA[:rnd.randrange(0, 200)]
    running.update(head)
    expected_running.update(head)
    body, expected_body, pos = new_sha1(), hashlib.sha1(), len(head)
    while pos < len(DATA):
        piece = DATA[pos:pos + rnd.choice([*CUTS, rnd.randrange(0, 9000)])]
        pos += max(len(piece), 1)
        update_both(running, body, memoryview(piece) if rnd.random() < 0.3 else piece)
        expected_running.update(piece)
        expected_body.update(piece)
        if rnd.random() < 0.05:  # a copy is independent of its original
            copy = running.copy()
            copy.update(b"more")
            assert running.hexdigest() == expected_running.hexdigest()
    assert running.hexdigest() == expected_running.hexdigest()
    assert body.digest() == expected_body.digest()


@pytest.mark.parametrize("length", [0, 1, 55, 56, 63, 64, 119, 120, 1 << 20])
def test_a_single_sha1_matches_hashlib_at_every_padding_boundary(length):
    sha1 = new_sha1()
    sha1.update(DATA[:length] if length <= len(DATA) else DATA * 4)
    expected = hashlib.sha1(DATA[:length] if length <= len(DATA) else DATA * 4)
    assert (sha1.hexdigest(), sha1.digest()) == (expected.hexdigest(), expected.digest())
    assert sha1.hexdigest() == sha1.hexdigest()  # a digest does not end the hash


def test_hash_inline_and_a_large_groups_sums_give_each_bodys_and_the_running_sha1():
    contents = [DATA[:100], DATA[100:200_000], b"", DATA[200_000:]]
    for running in (new_sha1(), hashlib.sha1()):  # a hashlib running SHA1 still works
        running.update(b"earlier groups")
        assert hash_inline(running, contents) == [hashlib.sha1(c).hexdigest() for c in contents]
        assert running.hexdigest() == hashlib.sha1(b"earlier groups" + DATA).hexdigest()
    running = new_sha1()
    started = GroupSums.start(running, contents)
    assert started is not None
    assert started.result() == [hashlib.sha1(c).hexdigest() for c in contents]
    assert running.hexdigest() == hashlib.sha1(DATA).hexdigest()


def test_the_extension_refuses_text_and_one_object_twice():
    pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    assert PAIRED
    sha1 = new_sha1()
    with pytest.raises(TypeError, match="encoded"):
        sha1.update("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two objects"):
        update_both(sha1, sha1, b"x")
    assert (sha1.name, sha1.digest_size, sha1.block_size) == ("sha1", 20, 64)


@pytest.mark.parametrize("cuts", [[], [0], [1024, 1024], [55, 0, 64, 1], [100, 199_900], [3000, 3000, 3000]])
def test_seal_gives_each_bodys_sha1_and_the_running_one_after_them(cuts):
    """A small group's seal, in one call where the extension is built and in Python
    where it is not (a hashlib running SHA1 takes that path everywhere): the same
    digests as hashlib's, whatever the running SHA1 held before."""
    contents, pos = [], 0
    for cut in cuts:
        contents.append(DATA[pos:pos + cut])
        pos += cut
    for running in (new_sha1(), hashlib.sha1()):
        running.update(b"a partial block of earlier groups")
        sums, running_hex = seal_inline(running, contents)
        assert sums == [hashlib.sha1(c).hexdigest() for c in contents]
        assert running_hex == running.hexdigest() == hashlib.sha1(
            b"a partial block of earlier groups" + DATA[:pos]).hexdigest()


def test_the_extensions_seal_takes_any_bytes_like_body_and_refuses_text():
    native = pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    running = native.sha1()
    sums, _ = native.seal(running, (memoryview(DATA[:10]), bytearray(DATA[10:20])))
    assert sums == [hashlib.sha1(DATA[:10]).hexdigest(), hashlib.sha1(DATA[10:20]).hexdigest()]
    with pytest.raises(TypeError, match="encoded"):
        native.seal(running, [b"fine", "text"])
    assert running.hexdigest() == hashlib.sha1(DATA[:20]).hexdigest()  # a refused group hashes nothing
    with pytest.raises(TypeError):
        native.seal(hashlib.sha1(), [b"x"])


def test_a_spool_without_the_extension_hashes_with_hashlib(tmp_path):
    """Herald works where the extension is not built: a fresh interpreter that cannot
    import it appends a group to a real spool, and the sums are hashlib's."""
    _append_in_a_fresh_interpreter(tmp_path, """
sys.modules["herald.fragment._spool_native"] = None  # as if never built: importing it raises ImportError
from herald.fragment import spool_sums
assert not spool_sums.PAIRED
""")


def test_an_extension_built_before_seal_keeps_the_paired_hashing(tmp_path):
    """A checkout whose extension was built before `seal` existed (not yet rebuilt by
    ``make``) still hashes in pairs: only the one-call seal is done in Python."""
    pytest.importorskip("herald.fragment._spool_native", reason="the C extension is not built here")
    _append_in_a_fresh_interpreter(tmp_path, """
import herald.fragment._spool_native as built
del built.seal  # as an older build of the extension, which had no seal
from herald.fragment import spool_sums
assert spool_sums.PAIRED and spool_sums._seal is None
""")


def _append_in_a_fresh_interpreter(tmp_path, setup: str) -> None:
    """Run ``setup`` in a fresh interpreter, then append a group to a real spool
    there: its body sums and its fragment's sum must be hashlib's."""
    script = f"""
import hashlib, sys
{setup}
from pathlib import Path
from herald.fragment.spool import Spool
from herald.protocol.journal import CompressionCodec
from herald.protocol.labels import LabelSet
spool = Spool(Path({str(tmp_path)!r}), "j", 0, CompressionCodec.NONE, LabelSet())
bodies = [b"one", b"two" * 700]
assert spool.append_group(bodies, LabelSet(), 1.0) == [hashlib.sha1(b).hexdigest() for b in bodies]
assert spool.fragment().sum == hashlib.sha1(b"".join(bodies)).hexdigest()
print("appended")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "appended"
