"""Fragments on disk and in stores: codecs, the cover set, stores and the persister.

What lives where (the `Fragment` value itself is in `herald.protocol.fragment`):

- `codecs` — NONE/GZIP/SNAPPY/ZSTANDARD bytes, whole-buffer and streaming.
- `coverset` — `CoverSet` (no fragment inside another) and `query`, Gazette's
  read-offset rule including its 6-hour offset jump. Pure.
- `stores` — `open_store(url, file_root)` for ``file://``, ``s3://``, ``gs://``,
  ``az://`` (the only fsspec user) and `list_fragments`.
- `persister` — `persist`: compress a finished spool and upload it once.
- `spool` and `index` — a replica's in-progress fragment and its fragment index.

Example, persisting a spool and finding it again by listing (all blocking)::

    store = open_store("file:///", file_root=data_dir / "fragments")
    persisted = persist(store, spool_fragment, spool_path, CompressionCodec.SNAPPY)
    assert persisted in list_fragments(store, spool_fragment.journal)
"""

from herald.fragment.codecs import (
    CodecError,
    Compressor,
    Decompressor,
    compress,
    compress_file,
    decompress,
    decompressing_reader,
)
from herald.fragment.coverset import OFFSET_JUMP_AGE_S, CoverSet, QueryResult, query
from herald.fragment.persister import persist
from herald.fragment.stores import FileStore, Store, list_fragments, open_store

__all__ = [
    "OFFSET_JUMP_AGE_S",
    "CodecError",
    "Compressor",
    "CoverSet",
    "Decompressor",
    "FileStore",
    "QueryResult",
    "Store",
    "compress",
    "compress_file",
    "decompress",
    "decompressing_reader",
    "list_fragments",
    "open_store",
    "persist",
    "query",
]
