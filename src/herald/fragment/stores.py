"""Fragment stores: where persisted fragments live (gazette-facts §4.6), over fsspec.

This is the one module that touches fsspec. A store is named by a URL whose path
ends in ``/``; fragment files sit under it at their content path
(``<journal>/<begin>-<end>-<sum><ext>``):

- ``file:///sub/`` — a directory under the broker's file root (``file:///`` is the
  root itself). Writes are atomic: temp file, fsync, rename.
- ``s3://bucket/prefix/?endpoint=&region=&profile=&ACL=&storageClass=&SSE=&SSEKMSKeyId=``
  — an explicit endpoint (MinIO, SeaweedFS and friends) selects path-style
  addressing; ``profile`` picks a section of the AWS shared config/credentials
  files, otherwise the usual AWS credential chain applies. Signed URLs are SigV4
  query-string URLs that a plain HTTP GET can fetch.
- ``gs://bucket/prefix/`` and ``az://container/prefix/?account=``.

Cloud backends (s3fs, gcsfs, adlfs) are imported only when such a URL is opened.
Query argument names match case-insensitively, as Gazette; unknown ones are rejected.

    >>> store = open_store("file:///", file_root="/var/lib/herald/fragments")
    >>> store.list("a/journal/")  # [(relative path, mod time in unix seconds)]
    []

Every method blocks on I/O: broker code calls them from an executor. Backend
failures (an unreachable endpoint, a refused credential) are raised as `OSError`
(`StoreError` when the backend's own type is not one), so callers need one
``except OSError`` to retry.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import logging
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, urlsplit

import fsspec

from herald.durable import fsync_directory, make_durable_dirs
from herald.protocol.errors import ValidationError
from herald.protocol.fragment import Fragment, parse_content_path
from herald.protocol.store_urls import STORE_QUERY_ARGS, validate_store_url

__all__ = [
    "FileStore",
    "Store",
    "StoreError",
    "list_fragments",
    "open_store",
]

log = logging.getLogger(__name__)

_TEMP_PREFIX = ".herald-put-"
_COPY_CHUNK_BYTES = 1 << 20

# botocore's defaults retry and wait for minutes on a dead endpoint; the persister
# retries forever and the health checker probes on its own schedule, so each call
# should fail fast and say why.
S3_CLIENT_CONFIG: Mapping[str, Any] = {
    "signature_version": "s3v4",
    "connect_timeout": 5,
    "read_timeout": 60,
    "retries": {"max_attempts": 3, "mode": "standard"},
    # Connections kept per store: its listing threads (herald.broker.listing_threads)
    # and uploads run at once; botocore's default is 10.
    "max_pool_connections": 32,
}


class StoreError(OSError):
    """A store backend failed with an error of its own type (botocore's, say)."""


class _Translated:
    """Context manager re-raising ``errors`` as `StoreError` naming the store."""

    __slots__ = ("_errors", "_url")

    def __init__(self, url: str, errors: tuple[type[BaseException], ...]) -> None:
        self._url, self._errors = url, errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, err, tb) -> bool:
        if err is not None and self._errors and isinstance(err, self._errors) \
                and not isinstance(err, OSError):
            raise StoreError(f"store {self._url}: {type(err).__name__}: {err}") from err
        return False


class Store:
    """A fragment store rooted at ``root`` (an fsspec path without protocol).

    Paths passed to methods are relative to the store URL and must not escape it.
    """

    def __init__(self, url: str, fs: Any, root: str,
                 backend_errors: tuple[type[BaseException], ...] = ()) -> None:
        self._url = url
        self._fs = fs
        self._root = root.rstrip("/")
        self._io = _Translated(url, backend_errors)

    @property
    def url(self) -> str:
        """The store URL, as configured (fragments record it as their ``store``)."""
        return self._url

    def put(self, relative_path: str, local_path: str | os.PathLike) -> None:
        """Upload ``local_path``; an object store makes it visible whole or not at all."""
        with self._io:
            self._fs.put_file(os.fspath(local_path), self._path(relative_path))

    def put_written(self, relative_path: str, write: Callable[[BinaryIO], object], scratch_dir: str) -> None:
        """Store what ``write`` writes to the binary file it is given, as ``put``
        does: here through a temp file in ``scratch_dir``, uploaded, then deleted."""
        with tempfile.NamedTemporaryFile(dir=scratch_dir, prefix=".persist-", suffix=".tmp") as temp:
            write(temp)
            temp.flush()
            self.put(relative_path, temp.name)

    def exists(self, relative_path: str) -> bool:
        with self._io:
            return bool(self._fs.exists(self._path(relative_path)))

    def open(self, relative_path: str) -> BinaryIO:
        """A binary file of the raw (still compressed) stored bytes; close it."""
        with self._io:
            return self._fs.open(self._path(relative_path), "rb")

    def get(self, relative_path: str) -> bytes:
        """The raw (still compressed) stored bytes. Raises FileNotFoundError."""
        with self._io:
            return bytes(self._fs.cat_file(self._path(relative_path)))

    def local_path(self, relative_path: str) -> str | None:
        """The file holding ``relative_path`` on this machine's disk, if the store is
        a local directory (a reader may then ``sendfile`` it); else None."""
        return None

    def mod_time(self, relative_path: str) -> float:
        """The stored object's modification time, unix seconds, as `list` reports it."""
        with self._io:
            return _mod_time(self._fs.info(self._path(relative_path)))

    def list(self, prefix: str = "") -> list[tuple[str, float]]:
        """Every file under ``prefix`` (recursive) as ``(path relative to prefix,
        mod time)``, sorted. ``prefix`` is "" or ends in "/", so listing ``a/b/``
        never matches ``a/bc``."""
        _check_prefix(prefix)
        base = self._path(prefix[:-1]) if prefix else self._root
        with self._io:
            found = self._find(base.rstrip("/"), prefix)
        start = len(self._fs._strip_protocol(base).rstrip("/")) + 1
        out = [(name[start:], _mod_time(info))
               for name, info in found.items() if info.get("type") != "directory"]
        return sorted(entry for entry in out if self._is_listed(entry[0]))

    def remove(self, relative_path: str) -> None:
        """Delete one file. Raises FileNotFoundError if it is not there."""
        with self._io:
            self._fs.rm_file(self._path(relative_path))

    def sign_get(self, relative_path: str, ttl_s: float) -> str:
        """A URL anyone can GET for ``ttl_s`` seconds (read offload, gazette-facts §4.8)."""
        with self._io:
            return self._fs.sign(self._path(relative_path), expiration=max(1, int(ttl_s)))

    def _find(self, base: str, prefix: str) -> dict[str, Any]:
        """Every file under ``base`` (the root joined with ``prefix``), by full path."""
        return self._fs.find(base, detail=True)

    def _is_listed(self, relative_path: str) -> bool:
        return True

    def _path(self, relative_path: str) -> str:
        _check_relative(relative_path)
        return f"{self._root}/{relative_path}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._url!r})"


class FileStore(Store):
    """A directory on local disk; ``put`` is atomic and durable."""

    def put(self, relative_path: str, local_path: str | os.PathLike) -> None:
        """Copy to a temp file in the target directory, fsync, rename, fsync the
        directory: a crash leaves the old state or the whole new file, never a part."""
        self.put_written(relative_path, lambda out: _copy_file(local_path, out), "")

    def put_written(self, relative_path: str, write: Callable[[BinaryIO], object], scratch_dir: str) -> None:
        """``write`` straight into the temp file in the target directory (no scratch
        copy to read back: a persisted fragment is written to disk once, not twice,
        beside the appends' syncs), then as ``put``."""
        del scratch_dir
        destination = self._path(relative_path)
        directory = os.path.dirname(destination)
        make_durable_dirs(Path(directory))  # the journal's store directory may be new
        fd, temp = tempfile.mkstemp(dir=directory, prefix=_TEMP_PREFIX)
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)
                out.flush()
                os.fchmod(out.fileno(), 0o644)
                os.fsync(out.fileno())
            os.replace(temp, destination)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        fsync_directory(directory)

    def local_path(self, relative_path: str) -> str | None:
        return self._path(relative_path)

    def sign_get(self, relative_path: str, ttl_s: float) -> str:
        """A ``file://`` URL of the absolute path: readable by whoever shares the disk."""
        return Path(self._path(relative_path)).as_uri()

    def _is_listed(self, relative_path: str) -> bool:
        # Hide our own in-flight puts.
        return not posixpath.basename(relative_path).startswith(_TEMP_PREFIX)


class S3Store(Store):
    """An S3 bucket (s3fs): one journal's listing is one ListObjectsV2 of its key
    prefix. s3fs's ``find`` of a path that matches no key asks twice more whether
    it names an object or a directory (HEAD, then a delimited LIST): three round
    trips for every journal with nothing persisted yet, which on a slow endpoint
    tripled the time a restarted broker's journals waited for their first listing.
    Listed as the root with a key prefix, an empty answer is final."""

    def _find(self, base: str, prefix: str) -> dict[str, Any]:
        if not prefix:
            return super()._find(base, prefix)
        return self._fs.find(self._root, prefix=prefix, detail=True)


def _copy_file(path: str | os.PathLike, out: BinaryIO) -> None:
    with open(path, "rb") as src:
        shutil.copyfileobj(src, out, _COPY_CHUNK_BYTES)


def open_store(url: str, file_root: str | os.PathLike, *, field: str = "store") -> Store:
    """Open the store named by ``url``; ``field`` names it in errors
    (``fragment.stores[0]``). Raises `ValidationError` for a malformed URL, an
    unknown query argument, or a missing backend package."""
    validate_store_url(url, field)
    parts = urlsplit(url)
    opener = _OPENERS[parts.scheme.lower()]
    args = _query_args(url, parts.query, _ALLOWED_ARGS[parts.scheme.lower()], field)
    return opener(url, parts, args, os.fspath(file_root), field)


def list_fragments(store: Store, journal: str, *, with_postfixes: bool = False) -> list[Fragment]:
    """The fragments of ``journal`` in ``store``, with ``store`` and ``mod_time`` set.

    Files in subdirectories of the journal's directory are skipped unless
    ``with_postfixes``: Herald writes no path postfixes, and such files are usually
    another journal's (``a/b/c``'s fragments live under ``a/b/``). Files that are
    not fragment names are skipped with a warning. Blocks on the store listing.
    """
    fragments = []
    for relative_path, mod_time in store.list(journal + "/"):
        if not with_postfixes and "/" in relative_path:
            continue
        try:
            fragment = parse_content_path(journal, relative_path)
        except ValidationError as err:
            log.warning("store=%s journal=%s skipping %r: %s", store.url, journal, relative_path, err)
            continue
        fragments.append(replace(fragment, store=store.url, mod_time=mod_time))
    return fragments


# --- URL handling -----------------------------------------------------------------


# The table lives in protocol so a spec naming an unknown argument is refused at apply.
_ALLOWED_ARGS: Mapping[str, Mapping[str, str]] = STORE_QUERY_ARGS


def _query_args(url: str, query: str, allowed: Mapping[str, str], field: str) -> dict[str, str]:
    args = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        key = allowed.get(name.lower())
        if key is None:
            raise ValidationError(field, f"unknown query argument {name!r} in store URL {url!r}")
        args[key] = value
    return args


def _open_file(url: str, parts: Any, args: dict, file_root: str, field: str) -> Store:
    root = os.path.join(os.path.abspath(file_root), parts.path.strip("/"))
    return FileStore(url, fsspec.filesystem("file"), root.rstrip("/") or "/")


def _open_s3(url: str, parts: Any, args: dict, file_root: str, field: str) -> Store:
    """An s3fs filesystem for ``url``. Listings are never cached: the index is
    rebuilt from them and must see other brokers' uploads and prunes."""
    s3fs = _import_backend("s3fs", url, field)
    botocore_exceptions = importlib.import_module("botocore.exceptions")
    client: dict[str, Any] = {}
    config: dict[str, Any] = dict(S3_CLIENT_CONFIG)
    if args.get("endpoint"):
        _check_endpoint(args["endpoint"], url, field)
        client["endpoint_url"] = args["endpoint"]
        config["s3"] = {"addressing_style": "path"}  # Explicit endpoints are MinIO-like.
    if args.get("region"):
        client["region_name"] = args["region"]
    extra = {k: v for k, v in args.items() if k[0].isupper() and v}
    kwargs: dict[str, Any] = {"client_kwargs": client, "config_kwargs": config,
                              "s3_additional_kwargs": extra, "use_listings_cache": False,
                              "skip_instance_cache": True}
    if args.get("profile"):
        kwargs["profile"] = args["profile"]
    errors = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError)
    return S3Store(url, s3fs.S3FileSystem(**kwargs), parts.netloc + parts.path, errors)


def _check_endpoint(endpoint: str, url: str, field: str) -> None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError(field, f"endpoint must be an http(s) URL, not {endpoint!r} ({url!r})")


def _open_gs(url: str, parts: Any, args: dict, file_root: str, field: str) -> Store:
    gcsfs = _import_backend("gcsfs", url, field)
    return Store(url, gcsfs.GCSFileSystem(), parts.netloc + parts.path)


def _open_az(url: str, parts: Any, args: dict, file_root: str, field: str) -> Store:
    adlfs = _import_backend("adlfs", url, field)
    kwargs = {"account_name": args["account"]} if args.get("account") else {}
    return Store(url, adlfs.AzureBlobFileSystem(**kwargs), parts.netloc + parts.path)


_OPENERS: Mapping[str, Callable[..., Store]] = {
    "file": _open_file,
    "s3": _open_s3,
    "gs": _open_gs,
    "az": _open_az,
}


def _import_backend(package: str, url: str, field: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ValidationError(field, f"store {url!r} needs the {package} package (pip install {package})") from None


# --- helpers ----------------------------------------------------------------------


def _check_relative(path: str) -> None:
    """Refuse paths that could leave the store root (journal names are already
    validated; this guards everything else)."""
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in path.split("/")):
        raise ValidationError("path", f"{path!r} is not a clean relative path")


def _check_prefix(prefix: str) -> None:
    if prefix and not prefix.endswith("/"):
        raise ValidationError("prefix", f"{prefix!r} must be empty or end in '/'")
    if prefix:
        _check_relative(prefix[:-1])


def _mod_time(info: Mapping[str, Any]) -> float:
    """fsspec backends disagree on the key and type of a file's modification time."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, str):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return float(value)
    return 0.0
