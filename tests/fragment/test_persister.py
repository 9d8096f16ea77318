"""Persisting spools: compress, upload once, and find the same fragment by listing [I-FRAG-1]."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from herald.fragment.codecs import decompress
from herald.fragment.persister import PERSIST_NICE, lower_thread_priority, persist
from herald.fragment.stores import Store, list_fragments, open_store
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

JOURNAL = "ab/journal"
CODECS = [c for c in CompressionCodec if c is not CompressionCodec.INVALID]


def spool(tmp_path: Path, data: bytes, begin: int = 100, codec=CompressionCodec.NONE) -> tuple[Fragment, Path]:
    path = tmp_path / "spools" / f"{begin:016x}.spool"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    fragment = Fragment(JOURNAL, begin, begin + len(data), hashlib.sha1(data).hexdigest(), codec)
    return fragment, path


@pytest.mark.parametrize("codec", CODECS)
def test_persisted_fragment_is_listed_back_identically(tmp_path: Path, codec: CompressionCodec) -> None:
    store = open_store("file:///frags/", tmp_path)
    data = os.urandom(64) * 5000
    fragment, path = spool(tmp_path, data)
    persisted = persist(store, fragment, path, codec)
    assert persisted.store == "file:///" + "frags/" and persisted.mod_time > 0
    assert persisted.codec is codec and persisted.sum == fragment.sum
    assert list_fragments(store, JOURNAL) == [persisted]
    assert decompress(store.get(persisted.content_path), codec) == data


def test_persist_defaults_to_the_fragments_codec(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "store")
    fragment, path = spool(tmp_path, b"hello", codec=CompressionCodec.SNAPPY)
    assert persist(store, fragment, path).content_name.endswith(".sz")


def test_persist_skips_upload_when_the_name_already_exists(tmp_path: Path) -> None:
    # Same content name means same bytes: a second replica's persist is a no-op.
    store = open_store("file:///", tmp_path / "store")
    fragment, path = spool(tmp_path, b"journal bytes", codec=CompressionCodec.GZIP)
    first = persist(store, fragment, path)
    path.write_bytes(b"something else")  # Would change the stored file if re-uploaded.
    second = persist(store, fragment, path)
    assert second == first
    assert decompress(store.get(first.content_path), CompressionCodec.GZIP) == b"journal bytes"


def test_persist_leaves_no_temp_files_beside_the_spool(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "store")
    fragment, path = spool(tmp_path, b"x" * 1000, codec=CompressionCodec.ZSTANDARD)
    persist(store, fragment, path)
    assert os.listdir(path.parent) == [path.name]


def test_a_file_store_is_written_once_with_no_scratch_copy(tmp_path: Path) -> None:
    # The compressed bytes go straight into the store's own temp file: a scratch
    # directory that does not even exist is never used.
    store = open_store("file:///", tmp_path / "store")
    data = b'{"event":1}\n' * 10_000
    store.put_written("j/a.sz", lambda out: out.write(data), str(tmp_path / "no-such-dir"))
    assert store.get("j/a.sz") == data
    assert os.listdir(tmp_path / "store" / "j") == ["a.sz"]


def test_a_failed_write_leaves_nothing_in_a_file_store(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "store")

    def half_then_fail(out) -> None:
        out.write(b"x" * 4096)
        raise OSError("disk trouble")

    with pytest.raises(OSError, match="disk trouble"):
        store.put_written("j/a.sz", half_then_fail, str(tmp_path))
    assert os.listdir(tmp_path / "store" / "j") == []
    assert not store.exists("j/a.sz")


def test_other_stores_write_through_a_scratch_file_they_delete(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    store = Store("memory://persist-test/", fsspec.filesystem("memory"), "/persist-test")
    fragment, path = spool(tmp_path, b'{"event":2}\n' * 1000, codec=CompressionCodec.SNAPPY)
    persisted = persist(store, fragment, path)
    assert decompress(store.get(persisted.content_path), CompressionCodec.SNAPPY) == b'{"event":2}\n' * 1000
    assert os.listdir(path.parent) == [path.name]


def test_persisting_threads_run_below_the_appends_priority():
    """`lower_thread_priority` (the persist executor's initializer) lowers its own
    thread only: compression yields the CPU to appends, the process keeps its nice."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    seen: list[int] = []

    def run() -> None:
        lower_thread_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [min(before + PERSIST_NICE, 19)]
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
