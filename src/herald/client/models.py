"""What the broker answers, as frozen value objects built by validating ``from_*``.

No I/O here: `herald.client._protocol` turns HTTP responses into these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.fragment import Fragment
from herald.protocol.journal import JournalSpec
from herald.protocol.labels import LabelSet

__all__ = ["AppendResult", "FragmentInfo", "JournalInfo", "ReadHead"]

MAX_OFFSET = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """One journal of a List response: its spec, etcd-style revisions and route."""

    spec: JournalSpec
    mod_revision: int
    create_revision: int
    route: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def primary(self) -> str:
        """The primary broker's member suffix (gazctl's PRIMARY column), or ""."""
        members = self.route.get("members") or []
        index = self.route.get("primary", -1)
        if not isinstance(index, int) or not 0 <= index < len(members):
            return ""
        return str(members[index].get("suffix", ""))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "journals") -> JournalInfo:
        if not isinstance(d, Mapping) or "spec" not in d:
            raise ValidationError(field, "expected {spec, mod_revision, create_revision, route}")
        spec = JournalSpec.from_dict(d["spec"], field_prefix=f"{field}.spec")
        return cls(spec, int(d.get("mod_revision", 0)), int(d.get("create_revision", 0)),
                   dict(d.get("route") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "mod_revision": self.mod_revision,
                "create_revision": self.create_revision, "route": self.route}


@dataclass(frozen=True, slots=True)
class FragmentInfo:
    """A fragment of a Fragments response, with a signed URL (or ``file://`` path)
    when one was asked for and the fragment is persisted."""

    fragment: Fragment
    signed_url: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "fragments") -> FragmentInfo:
        if not isinstance(d, Mapping) or "fragment" not in d:
            raise ValidationError(field, "expected {fragment, signed_url?}")
        url = d.get("signed_url") or None
        return cls(Fragment.from_dict(d["fragment"], f"{field}.fragment"), url)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fragment": self.fragment.to_dict()}
        if self.signed_url:
            out["signed_url"] = self.signed_url
        return out


@dataclass(frozen=True, slots=True)
class AppendResult:
    """An acknowledged (durable) append: where it landed, its SHA1, the registers
    after it committed, and the journal's write head."""

    begin: int
    end: int
    sha1_hex: str
    registers: LabelSet
    write_head: int

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> AppendResult:
        """From a ``PUT /<journal>`` 204's ``X-Commit-*`` headers."""
        try:
            return cls(int(headers["X-Commit-Begin"]), int(headers["X-Commit-End"]),
                       headers["X-Commit-SHA1-Sum"], LabelSet.parse(headers.get("X-Registers", "")),
                       int(headers["X-Write-Head"]))
        except (KeyError, ValueError) as err:
            raise HeraldError(Status.INTERNAL, f"append response lacks commit headers ({err})") from None

    def to_dict(self) -> dict[str, Any]:
        return {"begin": self.begin, "end": self.end, "sha1_hex": self.sha1_hex,
                "registers": self.registers.to_list(), "write_head": self.write_head}


@dataclass(frozen=True, slots=True)
class ReadHead:
    """Metadata of a read (GET/HEAD headers): where it really starts (after any
    offset jump), the write head, and the fragment holding ``offset``."""

    offset: int
    write_head: int
    fragment_name: str | None = None
    fragment_location: str | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], asked_offset: int) -> ReadHead:
        offset = asked_offset
        content_range = headers.get("Content-Range", "")
        if content_range.startswith("bytes "):
            try:
                offset = int(content_range[6:].split("-", 1)[0])
            except ValueError:
                pass
        return cls(offset, int(headers.get("X-Write-Head", "0") or 0),
                   headers.get("X-Fragment-Name") or None, headers.get("X-Fragment-Location") or None)
