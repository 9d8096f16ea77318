"""Read offload (gazette-facts §4.8): the content of a persisted fragment read
straight from its store — a signed URL over HTTP, a ``file://`` path readable
here, or a ``file:///`` store under a local root — so replays cost the broker
almost nothing. `RetryReader` (``offload=True``) and Spark's read tasks use it.

The codecs and stores (`herald.fragment`: fsspec, zstandard frames, crc32c) are
imported by the functions that decompress or open a store, on a fragment's first
read: every fresh Spark Python process imports this module through
`herald.spark.source`, and most of them (the driver's source runner, the sink's
commit runner, tasks reading only the unpersisted tail) never read a fragment.

    for chunk in read_fragment(info):     # FragmentInfo from client.fragments(...)
        ...
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from herald.client.models import FragmentInfo, ReadHead
from herald.protocol.errors import HeraldError, Status
from herald.protocol.fragment import Fragment, parse_content_path

__all__ = ["fragment_chunks", "offloadable", "read_fragment", "slice_chunks"]

#: Stored (compressed) bytes per read. A SNAPPY chunk of NDJSON decodes to ~6× its
#: size: 256 KiB gives ~1.5 MiB, which a reader's scan still finds in the CPU's
#: cache; 1 MiB (~6 MiB decoded) made the Spark batch read's scan and Arrow build
#: ~35 % dearer per row (issue 15, measured in `herald.spark.reading`'s terms).
HTTP_CHUNK_BYTES = 256 << 10


def _local_path(location: str) -> str | None:
    parts = urlsplit(location)
    if parts.scheme != "file":
        return None
    return url2pathname(parts.path)


def _raw_chunks(location: str) -> Iterator[bytes]:
    """The stored (still compressed) bytes at a ``file://`` path or an HTTP(S) URL."""
    path = _local_path(location)
    if path is not None:
        with open(path, "rb") as f:
            while chunk := f.read(HTTP_CHUNK_BYTES):
                yield chunk
        return
    # iter_raw: we decompress per the fragment's codec ourselves, whatever
    # Content-Encoding the store claims (Gazette forces identity for GZIP_OFFLOAD).
    import httpx  # here: a driver that never reads a signed URL does not load it

    with httpx.stream("GET", location, timeout=60, headers={"Accept-Encoding": "identity"}) as resp:
        if resp.status_code != 200:
            raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                              f"fragment store answered HTTP {resp.status_code} for a signed URL")
        yield from resp.iter_raw(HTTP_CHUNK_BYTES)


def _decompressed(raw: Iterator[bytes], fragment: Fragment) -> Iterator[bytes]:
    from herald.fragment.codecs import Decompressor  # see the module docstring

    decompressor = Decompressor(fragment.codec)
    for chunk in raw:
        if out := decompressor.decompress(chunk):
            yield out
    if out := decompressor.finish():
        yield out


def fragment_chunks(location: str, fragment: Fragment) -> Iterator[bytes]:
    """The decompressed content of ``fragment`` stored at ``location`` (a signed
    URL or a ``file://`` path, as a read head names it)."""
    return _decompressed(_raw_chunks(location), fragment)


def read_fragment(info: FragmentInfo, file_root: str | os.PathLike[str] | None = None) -> Iterator[bytes]:
    """The decompressed content of a persisted fragment, straight from its store:
    its signed URL over HTTP, a ``file://`` location read from local disk, or (with
    ``file_root``, where the broker's ``file:///`` stores resolve) the store itself.
    Blocks on I/O; raises `HeraldError` if the fragment cannot be reached."""
    fragment = info.fragment
    if info.signed_url:
        return fragment_chunks(info.signed_url, fragment)
    if fragment.store and file_root is not None and fragment.store.startswith("file://"):
        from herald.fragment.stores import open_store  # see the module docstring

        store = open_store(fragment.store, file_root)
        return _store_chunks(store, fragment)
    raise HeraldError(Status.FRAGMENT_STORE_UNHEALTHY,
                      f"no signed URL or local store root to read {fragment.content_name}")


def _store_chunks(store: Any, fragment: Fragment) -> Iterator[bytes]:
    from herald.fragment.codecs import decompressing_reader  # see the module docstring

    with store.open(fragment.content_path) as f:
        yield from decompressing_reader(f, fragment.codec)


def slice_chunks(chunks: Iterator[bytes], begin: int, offset: int, limit: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` of the part of a fragment's content (starting at journal
    offset ``begin``) that lies in ``[offset, limit)``. A chunk wholly inside is
    passed on as it is: slicing a decoder's bytearray copies it, every byte."""
    pos = begin
    for chunk in chunks:
        lo, hi = max(offset - pos, 0), min(limit - pos, len(chunk))
        if hi > lo:
            yield pos + lo, chunk if lo == 0 and hi == len(chunk) else chunk[lo:hi]
        pos += len(chunk)
        if pos >= limit:
            return


def offloadable(head: ReadHead, journal: str) -> Fragment | None:
    """The persisted fragment at ``head.offset``, if the client can read it directly."""
    if not head.fragment_location or not head.fragment_name or head.offset >= head.write_head:
        return None
    path = _local_path(head.fragment_location)
    if path is not None and not os.access(path, os.R_OK):
        return None  # a file:// location on the broker's disk that we don't share.
    if path is None and urlsplit(head.fragment_location).scheme not in ("http", "https"):
        return None
    return parse_content_path(journal, head.fragment_name)
