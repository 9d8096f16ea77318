"""Fragments: a journal's byte range ``[begin, end)`` held in one file, and its name.

A fragment's file name says everything needed to index it without opening it
(gazette-facts §4.2): ``<begin:016x>-<end:016x>-<sha1:40x><ext>``, with the extension
naming the compression codec. Store listings are turned back into fragments with
`parse_content_path`, so the name *is* the index entry ([I-FRAG-1]: a broker with an
empty disk rebuilds its index from listings alone).

    >>> f = Fragment("a/journal", 0x10, 0x20, "00" * 20, CompressionCodec.GZIP)
    >>> f.content_path
    'a/journal/0000000000000010-0000000000000020-0000000000000000000000000000000000000000.gz'
    >>> parse_content_path("a/journal", f.content_name) == f
    True

Pure: no I/O, no clock.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herald.protocol.errors import ValidationError, join_field
from herald.protocol.journal import CompressionCodec, validate_journal_name

__all__ = [
    "EMPTY_SUM",
    "MAX_OFFSET",
    "Fragment",
    "codec_extension",
    "parse_content_path",
]

EMPTY_SUM = "0" * 40
"""The sum of an empty fragment: all zeros, not the SHA1 of ``b""`` (as Gazette)."""

MAX_OFFSET = (1 << 63) - 1
"""Offsets are Gazette's int64; names hold them as 16 hex digits."""

MAX_POSTFIX_LENGTH = 512

_WRITE_EXTENSIONS: Mapping[CompressionCodec, str] = {
    CompressionCodec.NONE: ".raw",
    CompressionCodec.GZIP: ".gz",
    CompressionCodec.ZSTANDARD: ".zst",
    CompressionCodec.SNAPPY: ".sz",
    # Gazette writes no extension for GZIP_OFFLOAD_DECOMPRESSION (a TODO there
    # proposes `.gzod`); we match what it writes and accept both when parsing.
    CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION: "",
}

_READ_EXTENSIONS: Mapping[str, CompressionCodec] = {
    ".raw": CompressionCodec.NONE,
    ".gz": CompressionCodec.GZIP,
    ".gzip": CompressionCodec.GZIP,
    ".zst": CompressionCodec.ZSTANDARD,
    ".zstandard": CompressionCodec.ZSTANDARD,
    ".sz": CompressionCodec.SNAPPY,
    ".snappy": CompressionCodec.SNAPPY,
    "": CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION,
    ".gzod": CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION,
}

_HEX_OFFSET = re.compile(r"[0-9a-fA-F]{1,16}")
_HEX_SUM = re.compile(r"[0-9a-fA-F]{40}")


def codec_extension(codec: CompressionCodec) -> str:
    """The file extension written for ``codec`` (``.gz``, or ``""`` for GZIP_OFFLOAD)."""
    try:
        return _WRITE_EXTENSIONS[codec]
    except KeyError:
        raise ValidationError("compression_codec", f"no file extension for codec {codec!r}") from None


@dataclass(frozen=True, slots=True)
class Fragment:
    """Journal bytes ``[begin, end)``, their SHA1 ``sum`` and where they are kept.

    ``store`` is the backing store URL ("" while the fragment exists only in a local
    spool) and ``mod_time`` the store's modification time in unix seconds (0 = local).
    Constructing does not validate (spools build these by the thousand); anything
    from outside goes through `parse_content_path`, `from_dict` or `validate`.
    """

    journal: str
    begin: int
    end: int
    sum: str
    codec: CompressionCodec
    store: str = ""
    mod_time: float = 0
    path_postfix: str = ""

    @property
    def size(self) -> int:
        """Uncompressed length in bytes."""
        return self.end - self.begin

    @property
    def is_persisted(self) -> bool:
        return bool(self.store)

    @property
    def content_name(self) -> str:
        return f"{self.begin:016x}-{self.end:016x}-{self.sum}{codec_extension(self.codec)}"

    @property
    def content_path(self) -> str:
        """``journal/postfix/content_name``; an empty postfix disappears."""
        return posixpath.join(self.journal, self.path_postfix, self.content_name)

    def validate(self, field: str = "") -> None:
        """Raise `ValidationError` naming ``field.<attr>`` for the first bad attribute."""
        validate_journal_name(self.journal, join_field(field, "journal"))
        _validate_range(self.begin, self.end, field)
        if not isinstance(self.sum, str) or not _HEX_SUM.fullmatch(self.sum) or self.sum != self.sum.lower():
            raise ValidationError(join_field(field, "sum"), f"expected 40 lowercase hex digits: {self.sum!r}")
        if not isinstance(self.codec, CompressionCodec) or self.codec is CompressionCodec.INVALID:
            raise ValidationError(join_field(field, "compression_codec"), f"invalid codec {self.codec!r}")
        if not isinstance(self.mod_time, (int, float)) or self.mod_time < 0:
            raise ValidationError(join_field(field, "mod_time"), f"expected >= 0, got {self.mod_time!r}")
        _validate_postfix(self.path_postfix, join_field(field, "path_postfix"))

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with Gazette's field names (codec by name)."""
        return {
            "journal": self.journal,
            "begin": self.begin,
            "end": self.end,
            "sum": self.sum,
            "compression_codec": self.codec.name,
            "backing_store": self.store,
            "mod_time": self.mod_time,
            "path_postfix": self.path_postfix,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "fragment") -> Fragment:
        """Parse and validate the `to_dict` form; optional keys default as the dataclass."""
        if not isinstance(d, Mapping):
            raise ValidationError(field, f"expected an object, got {type(d).__name__}")
        unknown = set(d) - _DICT_KEYS
        if unknown:
            raise ValidationError(join_field(field, sorted(unknown)[0]), "unknown field")
        try:
            fragment = cls(
                journal=_typed(d, "journal", str, field),
                begin=_typed(d, "begin", int, field),
                end=_typed(d, "end", int, field),
                sum=_typed(d, "sum", str, field).lower(),
                codec=_parse_codec(d.get("compression_codec"), join_field(field, "compression_codec")),
                store=_typed(d, "backing_store", str, field, ""),
                mod_time=_typed(d, "mod_time", (int, float), field, 0),
                path_postfix=_typed(d, "path_postfix", str, field, ""),
            )
        except KeyError as err:
            raise ValidationError(join_field(field, err.args[0]), "required") from None
        fragment.validate(field)
        return fragment


_DICT_KEYS = frozenset(
    ("journal", "begin", "end", "sum", "compression_codec", "backing_store", "mod_time", "path_postfix")
)


def parse_content_path(journal: str, relative_path: str) -> Fragment:
    """Parse a path relative to the journal's directory (``[postfix/]name``).

    Accepts every extension Gazette accepts, case-insensitively (``.gz``/``.gzip``,
    ``.zst``/``.zstandard``, ``.sz``/``.snappy``, ``.raw``, ``""``/``.gzod``). Raises
    `ValidationError` (field ``fragment``) for anything that is not a fragment name.
    """
    postfix, base = posixpath.split(relative_path)
    stem, ext = posixpath.splitext(base)
    codec = _READ_EXTENSIONS.get(ext.lower())
    if codec is None:
        raise ValidationError("fragment", f"{relative_path!r}: unknown extension {ext!r}")
    parts = stem.split("-")
    if len(parts) != 3:
        raise ValidationError("fragment", f"{relative_path!r}: expected <begin>-<end>-<sum>")
    begin_hex, end_hex, sum_hex = parts
    for what, text in (("begin", begin_hex), ("end", end_hex)):
        if not _HEX_OFFSET.fullmatch(text):
            raise ValidationError(f"fragment.{what}", f"{relative_path!r}: bad hex offset {text!r}")
    if not _HEX_SUM.fullmatch(sum_hex):
        raise ValidationError("fragment.sum", f"{relative_path!r}: sum is not 40 hex digits")
    fragment = Fragment(
        journal=journal,
        begin=int(begin_hex, 16),
        end=int(end_hex, 16),
        sum=sum_hex.lower(),
        codec=codec,
        path_postfix=postfix,
    )
    fragment.validate("fragment")
    return fragment


def _validate_range(begin: int, end: int, field: str) -> None:
    for name, value in (("begin", begin), ("end", end)):
        if type(value) is not int or not 0 <= value <= MAX_OFFSET:
            raise ValidationError(join_field(field, name), f"expected 0..2^63-1, got {value!r}")
    if begin > end:
        raise ValidationError(join_field(field, "begin"), f"begin {begin} > end {end}")


def _validate_postfix(postfix: str, field: str) -> None:
    """A postfix is a clean relative path: it must not escape or alias the journal dir."""
    if not isinstance(postfix, str):
        raise ValidationError(field, "expected a string")
    if not postfix:
        return
    if len(postfix) > MAX_POSTFIX_LENGTH:
        raise ValidationError(field, f"longer than {MAX_POSTFIX_LENGTH} characters")
    if postfix.startswith("/") or any(part in ("", ".", "..") for part in postfix.split("/")):
        raise ValidationError(field, f"{postfix!r} is not a clean relative path")


def _typed(d: Mapping[str, Any], key: str, types: Any, field: str, default: Any = ...) -> Any:
    if key not in d:
        if default is ...:
            raise KeyError(key)
        return default
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise ValidationError(join_field(field, key), f"wrong type {type(value).__name__}")
    return value


def _parse_codec(value: Any, field: str) -> CompressionCodec:
    if value is None:
        raise ValidationError(field, "required")
    try:
        codec = CompressionCodec[value] if isinstance(value, str) else CompressionCodec(value)
    except (KeyError, ValueError):
        raise ValidationError(field, f"unknown codec {value!r}") from None
    if codec is CompressionCodec.INVALID:
        raise ValidationError(field, "codec INVALID is not allowed")
    return codec
