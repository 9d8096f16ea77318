"""File stores: URL rules, atomic puts, listing and the journal-prefix guard (§4.6, §4.7)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest

from herald.fragment.stores import FileStore, list_fragments, open_store
from herald.protocol.errors import ValidationError
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

SUM = "0102030405060708090a0b0c0d0e0f1011121314"


def name(begin: int, end: int, ext: str = ".raw") -> str:
    return f"{begin:016x}-{end:016x}-{SUM}{ext}"


def put_bytes(store, relative_path: str, data: bytes, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    store.put(relative_path, src)


def test_file_urls_are_rooted_at_the_file_root(tmp_path: Path) -> None:
    root_store = open_store("file:///", tmp_path)
    sub_store = open_store("file:///sub/dir/", tmp_path)
    put_bytes(root_store, "a/x", b"1", tmp_path)
    put_bytes(sub_store, "a/x", b"2", tmp_path)
    assert (tmp_path / "a/x").read_bytes() == b"1"
    assert (tmp_path / "sub/dir/a/x").read_bytes() == b"2"
    assert isinstance(root_store, FileStore) and root_store.url == "file:///"


def test_put_exists_get_open_list_remove(tmp_path: Path) -> None:
    store = open_store("file:///frags/", tmp_path / "root")
    assert not store.exists("a/journal/f1") and store.list("a/journal/") == []
    put_bytes(store, "a/journal/f1", b"one", tmp_path)
    put_bytes(store, "a/journal/deep/f2", b"two", tmp_path)
    assert store.exists("a/journal/f1")
    assert store.get("a/journal/f1") == b"one"
    with store.open("a/journal/deep/f2") as f:
        assert f.read() == b"two"
    listing = store.list("a/journal/")
    assert [p for p, _ in listing] == ["deep/f2", "f1"]
    assert listing[1][1] == store.mod_time("a/journal/f1") == os.stat(tmp_path / "root/frags/a/journal/f1").st_mtime
    assert [p for p, _ in store.list()] == ["a/journal/deep/f2", "a/journal/f1"]
    store.remove("a/journal/f1")
    assert not store.exists("a/journal/f1")
    with pytest.raises(FileNotFoundError):
        store.get("a/journal/f1")
    with pytest.raises(FileNotFoundError):
        store.remove("a/journal/f1")


def test_put_replaces_whole_file_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "root")
    put_bytes(store, "j/f", b"old", tmp_path)
    put_bytes(store, "j/f", b"new content", tmp_path)
    assert store.get("j/f") == b"new content"
    assert os.listdir(tmp_path / "root/j") == ["f"]


def test_failed_put_leaves_nothing_behind(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "root")
    with pytest.raises(FileNotFoundError):
        store.put("j/f", tmp_path / "missing")
    assert os.listdir(tmp_path / "root/j") == [] and store.list("j/") == []


def test_sign_get_of_a_file_store_is_a_file_url_of_the_absolute_path(tmp_path: Path) -> None:
    store = open_store("file:///s/", tmp_path)
    put_bytes(store, "j/f", b"signed", tmp_path)
    url = store.sign_get("j/f", ttl_s=60)
    assert urlsplit(url).scheme == "file"
    assert Path(url2pathname(urlsplit(url).path)).read_bytes() == b"signed"


@pytest.mark.parametrize("path", ["", "/abs", "../escape", "j/../../x", "j//f", "./f"])
def test_paths_that_could_escape_the_root_are_rejected(tmp_path: Path, path: str) -> None:
    store = open_store("file:///", tmp_path)
    with pytest.raises(ValidationError):
        store.exists(path)


def test_list_prefix_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        open_store("file:///", tmp_path).list("ab/cd")


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("file:///no-slash", "end in '/'"),
        ("file:///\x00/", "control character"),
        ("gs:///path/", "bucket"),
        ("/relative/", "absolute"),
        ("file://host/x/", "no host"),
        ("file:///x/../y/", "clean"),
        ("ftp://bucket/x/", "unsupported"),
        ("s3:///x/", "bucket"),
        ("file:///?endpoint=x", "'endpoint'"),
        ("gs://bucket/p/?Bogus=1", "'Bogus'"),
    ],
)
def test_bad_store_urls_are_rejected_naming_the_problem(tmp_path: Path, url: str, needle: str) -> None:
    with pytest.raises(ValidationError) as err:
        open_store(url, tmp_path, field="fragment.stores[1]")
    assert err.value.field == "fragment.stores[1]" and needle in err.value.message


def test_unknown_s3_query_argument_is_rejected_before_any_backend_import(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        open_store("s3://bucket/p/?endpoint=http://x&nope=1", tmp_path)
    assert "'nope'" in err.value.message


def test_missing_cloud_backend_names_the_url(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(ValidationError) as err:
            open_store("gs://bucket/p/", tmp_path)
        assert "gs://bucket/p/" in err.value.message and "gcsfs" in err.value.message
    else:
        pytest.skip("gcsfs is installed")


def test_list_fragments_parses_names_and_sets_store_and_mod_time(tmp_path: Path, caplog) -> None:
    store = open_store("file:///", tmp_path / "root")
    put_bytes(store, f"ab/cd/{name(0, 10)}", b"x", tmp_path)
    put_bytes(store, f"ab/cd/{name(10, 20, '.SZ')}", b"x", tmp_path)
    put_bytes(store, "ab/cd/notes.txt", b"x", tmp_path)
    with caplog.at_level(logging.WARNING, logger="herald.fragment.stores"):
        listed = list_fragments(store, "ab/cd")
    assert [(f.begin, f.end, f.codec) for f in listed] == [(0, 10, CompressionCodec.NONE),
                                                          (10, 20, CompressionCodec.SNAPPY)]
    assert all(f.store == "file:///" and f.mod_time == store.mod_time(f.content_path.replace(".sz", ".SZ"))
               for f in listed)
    assert "notes.txt" in caplog.text


def test_list_fragments_ignores_journals_sharing_a_name_prefix(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "root")
    put_bytes(store, f"ab/cd/{name(0, 10)}", b"x", tmp_path)
    put_bytes(store, f"ab/cd/c/{name(0, 99)}", b"x", tmp_path)  # journal ab/cd/c
    put_bytes(store, f"ab/cde/{name(0, 77)}", b"x", tmp_path)  # journal ab/cde
    assert [(f.begin, f.end) for f in list_fragments(store, "ab/cd")] == [(0, 10)]
    with_postfixes = list_fragments(store, "ab/cd", with_postfixes=True)
    assert [f.path_postfix for f in with_postfixes] == ["", "c"]


def test_list_fragments_of_an_unknown_journal_is_empty(tmp_path: Path) -> None:
    assert list_fragments(open_store("file:///", tmp_path), "never/written") == []


def test_listed_fragment_content_path_is_where_it_was_read(tmp_path: Path) -> None:
    store = open_store("file:///", tmp_path / "root")
    fragment = Fragment("ab/cd", 5, 9, SUM, CompressionCodec.GZIP)
    put_bytes(store, fragment.content_path, b"gz", tmp_path)
    [listed] = list_fragments(store, "ab/cd")
    assert store.get(listed.content_path) == b"gz"
