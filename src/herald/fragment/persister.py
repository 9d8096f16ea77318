"""Persisting a completed spool to a store (gazette-facts §4.6).

A fragment's content name is derived from its range and SHA1, so the same name
always means the same bytes: if the name already exists in the store (another
replica got there first, or an earlier attempt uploaded it before crashing) there
is nothing to do. Otherwise the spool is compressed into a temp file beside it and
uploaded.

    >>> persisted = persist(store, spool_fragment, spool_path)  # doctest: +SKIP
    >>> persisted.store == store.url and persisted.mod_time > 0  # doctest: +SKIP
    True

Blocking (compression and upload): the broker runs it in an executor. Idempotent:
retry freely after any failure.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import replace

from herald.fragment.codecs import compress_file
from herald.fragment.stores import Store
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec

__all__ = ["persist"]

log = logging.getLogger(__name__)


def persist(store: Store, fragment: Fragment, local_spool_path: str | os.PathLike,
            codec: CompressionCodec | None = None) -> Fragment:
    """Put the uncompressed spool file ``local_spool_path`` holding ``fragment`` into
    ``store``, compressed with ``codec`` (default: the fragment's own).

    Returns the fragment as the store now lists it: ``store`` set to the store URL
    and ``mod_time`` to the stored file's modification time. Raises whatever the
    store raises; nothing partial is left behind in a ``file://`` store.
    """
    if codec is not None and codec is not fragment.codec:
        fragment = replace(fragment, codec=codec)
    path = fragment.content_path
    if store.exists(path):
        log.debug("store=%s already has %s; skipping upload", store.url, path)
    elif fragment.codec is CompressionCodec.NONE:
        store.put(path, local_spool_path)
    else:
        _put_compressed(store, path, os.fspath(local_spool_path), fragment.codec)
    return replace(fragment, store=store.url, mod_time=store.mod_time(path))


def _put_compressed(store: Store, path: str, spool_path: str, codec: CompressionCodec) -> None:
    """Compress next to the spool (same disk, already sized for it), upload, delete."""
    directory = os.path.dirname(os.path.abspath(spool_path))
    with tempfile.NamedTemporaryFile(dir=directory, prefix=".persist-", suffix=".tmp") as temp:
        compress_file(spool_path, temp, codec)
        temp.flush()
        store.put(path, temp.name)
