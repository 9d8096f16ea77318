"""The keyspace vocabulary shared by the local and etcd implementations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.journal import JournalSpec, validate_journal_name

CREATE = 0
BLIND = -1


@dataclass(frozen=True, slots=True)
class Entry:
    """A spec as stored, with etcd-style revisions."""

    spec: JournalSpec
    create_revision: int
    mod_revision: int


@dataclass(frozen=True, slots=True)
class Change:
    """One change of an atomic apply: an upsert or a delete, with its expectation.

    ``expect_mod_revision``: 0 = must not exist (create), >0 = must equal the current
    revision (compare-and-set), −1 = whatever is there (blind). Deletes need >0 or −1.
    """

    expect_mod_revision: int
    upsert: JournalSpec | None = None
    delete: str | None = None

    @classmethod
    def from_dict(cls, d: dict, field: str) -> Change:
        if not isinstance(d, dict):
            raise ValidationError(field, "must be an object with 'upsert' or 'delete'")
        unknown = set(d) - {"upsert", "delete", "expect_mod_revision"}
        if unknown:
            raise ValidationError(f"{field}.{sorted(unknown)[0]}", "unknown field")
        expect = d.get("expect_mod_revision", CREATE)
        if not isinstance(expect, int) or expect < BLIND:
            raise ValidationError(f"{field}.expect_mod_revision", "must be an integer ≥ -1")
        if ("upsert" in d) == ("delete" in d):
            raise ValidationError(field, "exactly one of 'upsert' or 'delete' is required")
        if "upsert" in d:
            spec = JournalSpec.from_dict(d["upsert"], field_prefix=f"{field}.upsert")
            spec.validate()
            return cls(expect, upsert=spec)
        name = d["delete"]
        if not isinstance(name, str):
            raise ValidationError(f"{field}.delete", "must be a journal name")
        validate_journal_name(name, field=f"{field}.delete")
        if expect == CREATE:
            raise ValidationError(f"{field}.expect_mod_revision", "a delete needs a revision > 0 or -1")
        return cls(expect, delete=name)

    def to_dict(self) -> dict:
        if self.upsert is not None:
            return {"upsert": self.upsert.to_dict(), "expect_mod_revision": self.expect_mod_revision}
        return {"delete": self.delete, "expect_mod_revision": self.expect_mod_revision}

    @property
    def name(self) -> str:
        return self.upsert.name if self.upsert is not None else self.delete  # type: ignore[return-value]


def check_expectations(current: dict[str, Entry], changes: list[Change]) -> None:
    """Raise ETCD_TRANSACTION_FAILED naming the first change whose revision is stale."""
    seen = set()
    for i, change in enumerate(changes):
        if change.name in seen:
            raise ValidationError(f"changes[{i}]", f"journal {change.name} appears twice")
        seen.add(change.name)
        entry = current.get(change.name)
        actual = entry.mod_revision if entry else 0
        expect = change.expect_mod_revision
        if expect in (BLIND, actual):
            continue
        if change.delete is not None and entry is None:
            raise HeraldError(Status.JOURNAL_NOT_FOUND, f"journal {change.name} does not exist",
                              f"changes[{i}].delete")
        what = "already exists" if expect == CREATE else (
            "does not exist" if entry is None else f"is at revision {actual}")
        raise HeraldError(
            Status.ETCD_TRANSACTION_FAILED,
            f"journal {change.name} {what}, but the change expected revision {expect}"
            " (list it again and re-apply)", f"changes[{i}].expect_mod_revision")


class KeySpace(Protocol):
    """Specs with revisions; ``apply`` is atomic over all its changes."""

    revision: int

    def entries(self) -> dict[str, Entry]: ...

    def get(self, name: str) -> Entry | None: ...

    async def apply(self, changes: list[Change]) -> int: ...

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> None:
        """Return once this view has applied ``revision``; TimeoutError past ``timeout_s``."""
