"""Journal names and JournalSpecs: Gazette's fields, limits and YAML shape.

A JournalSpec is what an operator applies (``herald journals apply``) and what
brokers read from the keyspace. `JournalSpec.from_dict` accepts Gazette's YAML
shape and validates; `to_dict` writes it back, omitting zero values.
"""

from __future__ import annotations

import enum
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from herald.protocol._duration import format_duration, parse_duration
from herald.protocol.errors import ValidationError, with_field_prefix
from herald.protocol.labels import (
    CONTENT_TYPE,
    MESSAGE_SUBTYPE,
    MESSAGE_TYPE,
    RESERVED_LABELS,
    SINGLE_VALUE_LABELS,
    LabelSet,
    journal_meta_labels,
    validate_token,
)
from herald.protocol.store_urls import validate_store_url

__all__ = [
    "CompressionCodec",
    "FragmentSpec",
    "JournalFlags",
    "JournalSpec",
    "JournalSuspend",
    "SuspendLevel",
    "format_duration",
    "is_readable",
    "is_writable",
    "parse_duration",
    "split_journal_meta",
    "validate_journal_name",
]

MIN_JOURNAL_NAME_LEN, MAX_JOURNAL_NAME_LEN = 4, 512
JOURNAL_NAME_SYMBOLS = "-_+/.=%"
MAX_REPLICATION = 5
MIN_FRAGMENT_LENGTH, MAX_FRAGMENT_LENGTH = 1 << 10, 1 << 34
MIN_REFRESH_INTERVAL_S, MAX_REFRESH_INTERVAL_S = 1.0, 24 * 3600.0
MIN_FLUSH_INTERVAL_S = 60.0


def validate_journal_name(name: str, field: str = "name") -> None:
    """A journal name is 4..512 letters/digits/``-_+/.=%``, a clean relative path
    with no ``..`` segment, so it can never escape a fragment store's root."""
    if isinstance(name, str) and ";" in name:
        raise ValidationError(field, f"journal name cannot carry ;metadata ({name!r})")
    validate_token(name, JOURNAL_NAME_SYMBOLS, MIN_JOURNAL_NAME_LEN, MAX_JOURNAL_NAME_LEN, field)
    if name.startswith("/"):
        raise ValidationError(field, f"cannot begin with '/' ({name!r})")
    if ".." in name.split("/"):
        raise ValidationError(field, f"cannot have a '..' segment ({name!r})")
    if posixpath.normpath(name) != name:
        raise ValidationError(field, f"must be a clean path ({name!r})")


def split_journal_meta(journal: str) -> tuple[str, str]:
    """``"a/b;reader-1"`` → ``("a/b", "reader-1")``: read/append requests may tag a
    journal with ``;meta`` that routing ignores."""
    name, _, meta = journal.partition(";")
    return name, meta


class CompressionCodec(enum.IntEnum):
    INVALID = 0
    NONE = 1
    GZIP = 2
    ZSTANDARD = 3
    SNAPPY = 4
    GZIP_OFFLOAD_DECOMPRESSION = 5


class JournalFlags(enum.IntEnum):
    """Only these four values are valid; NOT_SPECIFIED means read+write."""

    NOT_SPECIFIED = 0
    O_RDONLY = 1
    O_WRONLY = 2
    O_RDWR = 4

    def is_readable(self) -> bool:
        return self in (JournalFlags.NOT_SPECIFIED, JournalFlags.O_RDONLY, JournalFlags.O_RDWR)

    def is_writable(self) -> bool:
        return self in (JournalFlags.NOT_SPECIFIED, JournalFlags.O_WRONLY, JournalFlags.O_RDWR)


def is_readable(flag: int) -> bool:
    return JournalFlags(flag).is_readable()


def is_writable(flag: int) -> bool:
    return JournalFlags(flag).is_writable()


class SuspendLevel(enum.IntEnum):
    """PARTIAL keeps one replica (effective replication 1); FULL keeps none."""

    NONE = 0
    PARTIAL = 1
    FULL = 2


@dataclass(frozen=True, slots=True)
class JournalSuspend:
    """Managed by brokers; operators pass it through unchanged on updates."""

    level: SuspendLevel = SuspendLevel.NONE
    offset: int = 0


_E = TypeVar("_E", bound=enum.IntEnum)


def _enum(cls: type[_E], raw: Any, field: str) -> _E:
    """An enum from its name or number (YAML accepts both)."""
    try:
        if isinstance(raw, str):
            return cls[raw]
        if isinstance(raw, int) and not isinstance(raw, bool):
            return cls(raw)
    except (KeyError, ValueError):
        pass
    options = ", ".join(m.name for m in cls)
    raise ValidationError(field, f"invalid {cls.__name__} ({raw!r}; options are {options})")


#: Every integer field is an int64 in Gazette's protobufs (and in etcd's JSON here).
INT64_MAX = (1 << 63) - 1


def _int(raw: Any, field: str) -> int:
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise ValidationError(field, f"expected an integer ({raw!r})")
    if not -INT64_MAX - 1 <= raw <= INT64_MAX:
        raise ValidationError(field, f"out of the 64-bit integer range ({raw})")
    return raw


def _check_keys(d: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(d, Mapping):
        raise ValidationError(None, f"expected a mapping, got {type(d).__name__}")
    for key in d:
        if key not in allowed:
            raise ValidationError(str(key), f"unknown field (expected one of {', '.join(allowed)})")


def _check_template(text: str) -> None:
    """Light check of a path postfix template: delimiters are balanced."""
    rest = re.sub(r"\{\{.*?\}\}", "", text, flags=re.DOTALL)
    if "{{" in rest or "}}" in rest:
        raise ValidationError("path_postfix_template", f"unbalanced {{{{ }}}} in {text!r}")


_FRAGMENT_KEYS = (
    "length",
    "compression_codec",
    "stores",
    "refresh_interval",
    "retention",
    "flush_interval",
    "path_postfix_template",
)


@dataclass(frozen=True, slots=True)
class FragmentSpec:
    """How a journal's content is cut into fragments and where they persist.
    ``stores`` empty means fragments stay local; new fragments go to the first."""

    length: int = 512 * 1024 * 1024
    compression_codec: CompressionCodec = CompressionCodec.SNAPPY
    stores: tuple[str, ...] = ()
    refresh_interval_s: float = 300.0
    retention_s: float = 0.0
    flush_interval_s: float = 0.0
    path_postfix_template: str = ""

    def validate(self) -> None:
        length = _int(self.length, "length")
        if not MIN_FRAGMENT_LENGTH <= length <= MAX_FRAGMENT_LENGTH:
            raise ValidationError(
                "length",
                f"invalid length ({length}; expected "
                f"{MIN_FRAGMENT_LENGTH} <= length <= {MAX_FRAGMENT_LENGTH})",
            )
        codec = _enum(CompressionCodec, self.compression_codec, "compression_codec")
        if codec is CompressionCodec.INVALID:
            raise ValidationError("compression_codec", "compression codec must be set")
        for i, store in enumerate(self.stores):
            validate_store_url(store, f"stores[{i}]")
        offload = self.stores and codec is CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION
        if offload and urlsplit(self.stores[0]).scheme == "file":
            raise ValidationError("stores[0]", "GZIP_OFFLOAD_DECOMPRESSION needs a cloud store, not file://")
        if not MIN_REFRESH_INTERVAL_S <= self.refresh_interval_s <= MAX_REFRESH_INTERVAL_S:
            raise ValidationError(
                "refresh_interval",
                f"invalid refresh interval ({format_duration(self.refresh_interval_s)}; "
                "expected 1s..24h0m0s)",
            )
        if self.flush_interval_s and self.flush_interval_s < MIN_FLUSH_INTERVAL_S:
            raise ValidationError(
                "flush_interval",
                f"invalid flush interval ({format_duration(self.flush_interval_s)}; expected 0 or >= 1m0s)",
            )
        _check_template(self.path_postfix_template)
        # Retention needs no check: <= 0 means keep forever.

    def to_dict(self) -> dict[str, Any]:
        """Gazette's YAML shape, zero values omitted."""
        out: dict[str, Any] = {}
        if self.length:
            out["length"] = self.length
        if self.compression_codec:
            out["compression_codec"] = CompressionCodec(self.compression_codec).name
        if self.stores:
            out["stores"] = list(self.stores)
        for key, seconds in (
            ("refresh_interval", self.refresh_interval_s),
            ("retention", self.retention_s),
            ("flush_interval", self.flush_interval_s),
        ):
            if seconds:
                out[key] = format_duration(seconds)
        if self.path_postfix_template:
            out["path_postfix_template"] = self.path_postfix_template
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FragmentSpec:
        """Parse (not validate) Gazette's YAML ``fragment:`` mapping; absent keys
        take Herald's defaults."""
        _check_keys(d, _FRAGMENT_KEYS)
        base = cls()
        stores = d.get("stores") or ()
        if isinstance(stores, (str, bytes)) or not isinstance(stores, (list, tuple)):
            raise ValidationError("stores", "expected a list of store URLs")
        return cls(
            length=_int(d.get("length", base.length), "length"),
            compression_codec=_enum(
                CompressionCodec, d.get("compression_codec", base.compression_codec), "compression_codec"
            ),
            stores=tuple(stores),
            refresh_interval_s=parse_duration(
                d.get("refresh_interval", base.refresh_interval_s), "refresh_interval"
            ),
            retention_s=parse_duration(d.get("retention", 0), "retention"),
            flush_interval_s=parse_duration(d.get("flush_interval", 0), "flush_interval"),
            path_postfix_template=str(d.get("path_postfix_template") or ""),
        )


_SPEC_KEYS = ("name", "replication", "labels", "fragment", "flags", "max_append_rate", "suspend")
_RE_MEDIA_TYPE = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(/[!#$%&'*+\-.^_`|~0-9A-Za-z]+)?$")


@dataclass(frozen=True, slots=True)
class JournalSpec:
    """A journal's configuration (Gazette's JournalSpec fields and limits)."""

    name: str
    replication: int = 1
    labels: LabelSet = field(default_factory=LabelSet)
    fragment: FragmentSpec = field(default_factory=FragmentSpec)
    flags: JournalFlags = JournalFlags.NOT_SPECIFIED
    max_append_rate: int = 0
    suspend: JournalSuspend = field(default_factory=JournalSuspend)

    def meta_labels(self) -> LabelSet:
        """Labels plus the implicit ``name`` label, for selector matching."""
        return journal_meta_labels(self.labels, self.name)

    def validate(self) -> None:
        """Raise `ValidationError` naming the first bad field (``fragment.stores[0]``)."""
        validate_journal_name(self.name, "name")
        replication = _int(self.replication, "replication")
        if not 1 <= replication <= MAX_REPLICATION:
            raise ValidationError(
                "replication", f"invalid replication ({replication}; expected 1 <= replication <= 5)"
            )
        with with_field_prefix("labels"):
            self.labels.validate()
            _validate_journal_labels(self.labels)
        with with_field_prefix("fragment"):
            self.fragment.validate()
        _enum(JournalFlags, self.flags, "flags")
        if _int(self.max_append_rate, "max_append_rate") < 0:
            raise ValidationError("max_append_rate", f"must be >= 0 ({self.max_append_rate})")
        _enum(SuspendLevel, self.suspend.level, "suspend.level")
        if _int(self.suspend.offset, "suspend.offset") < 0:
            raise ValidationError("suspend.offset", f"must be >= 0 ({self.suspend.offset})")

    def to_dict(self) -> dict[str, Any]:
        """Gazette's YAML shape (snake_case keys), zero values omitted."""
        out: dict[str, Any] = {"name": self.name}
        if self.replication:
            out["replication"] = self.replication
        if self.labels:
            out["labels"] = [
                {"name": lb.name, "value": lb.value} if lb.value else {"name": lb.name}
                for lb in self.labels
            ]
        if fragment := self.fragment.to_dict():
            out["fragment"] = fragment
        if self.flags:
            out["flags"] = JournalFlags(self.flags).name
        if self.max_append_rate:
            out["max_append_rate"] = self.max_append_rate
        if self.suspend.level or self.suspend.offset:
            suspend: dict[str, Any] = {"level": SuspendLevel(self.suspend.level).name}
            if self.suspend.offset:
                suspend["offset"] = self.suspend.offset
            out["suspend"] = suspend
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field_prefix: str = "") -> JournalSpec:
        """Parse and validate Gazette's YAML shape. Durations may be Go strings
        (``1m0s``) or seconds; enums names or numbers. Unknown keys are errors."""
        with with_field_prefix(field_prefix):
            _check_keys(d, _SPEC_KEYS)
            if "name" not in d:
                raise ValidationError("name", "required")
            with with_field_prefix("labels"):
                labels = LabelSet.from_list(d.get("labels") or [])
            with with_field_prefix("fragment"):
                fragment = FragmentSpec.from_dict(d.get("fragment") or {})
            spec = cls(
                name=d["name"],
                replication=_int(d.get("replication", 1), "replication"),
                labels=labels,
                fragment=fragment,
                flags=_enum(JournalFlags, d.get("flags", 0), "flags"),
                max_append_rate=_int(d.get("max_append_rate", 0), "max_append_rate"),
                suspend=_suspend_from_dict(d.get("suspend") or {}),
            )
            spec.validate()
        return spec


def _suspend_from_dict(d: Any) -> JournalSuspend:
    with with_field_prefix("suspend"):
        _check_keys(d, ("level", "offset"))
        return JournalSuspend(
            level=_enum(SuspendLevel, d.get("level", 0), "level"),
            offset=_int(d.get("offset", 0), "offset"),
        )


def _validate_journal_labels(labels: LabelSet) -> None:
    """Reserved names, single-valued well-known labels, and content-type rules.
    Field paths are relative to ``labels``."""
    seen: set[str] = set()
    for i, label in enumerate(labels):
        if label.name in RESERVED_LABELS:
            raise ValidationError(f"[{i}].name", f"label {label.name!r} is reserved")
        if label.name in SINGLE_VALUE_LABELS and label.name in seen:
            raise ValidationError(f"[{i}]", f"label {label.name!r} may have only one value")
        seen.add(label.name)
        if label.name == CONTENT_TYPE and not _RE_MEDIA_TYPE.match(label.value):
            raise ValidationError(f"[{i}].value", f"content-type is not a MIME type ({label.value!r})")
    if labels.values_of(MESSAGE_TYPE) and not labels.values_of(CONTENT_TYPE):
        raise ValidationError(None, f"{MESSAGE_TYPE} requires a {CONTENT_TYPE} label")
    if labels.values_of(MESSAGE_SUBTYPE) and not labels.values_of(MESSAGE_TYPE):
        raise ValidationError(None, f"{MESSAGE_SUBTYPE} requires a {MESSAGE_TYPE} label")
