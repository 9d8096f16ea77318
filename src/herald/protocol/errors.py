"""Statuses, their HTTP codes, and the typed errors that carry them.

One `Status` enum holds Gazette's broker statuses (same names and numbers as
Gazette's protocol) plus Herald's own request-level statuses. `HTTP_CODES` is the
single table mapping each status to an HTTP code: the server answers
``{status, message, field}`` with that code, and the client rebuilds the same typed
error with `HeraldError.from_dict`.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any


class Status(enum.Enum):
    """Outcome of a request. Values 0..15 are Gazette's wire numbers."""

    OK = 0
    JOURNAL_NOT_FOUND = 1
    NO_JOURNAL_PRIMARY_BROKER = 2
    NOT_JOURNAL_PRIMARY_BROKER = 3
    INSUFFICIENT_JOURNAL_BROKERS = 4
    NOT_JOURNAL_BROKER = 5
    OFFSET_NOT_YET_AVAILABLE = 6
    WRONG_ROUTE = 7
    PROPOSAL_MISMATCH = 8
    ETCD_TRANSACTION_FAILED = 9
    NOT_ALLOWED = 10
    WRONG_APPEND_OFFSET = 11
    INDEX_HAS_GREATER_OFFSET = 12
    REGISTER_MISMATCH = 13
    SUSPENDED = 14
    FRAGMENT_STORE_UNHEALTHY = 15
    # Herald's own: failures Gazette reports as gRPC errors rather than statuses.
    INVALID_ARGUMENT = 100
    PAYLOAD_TOO_LARGE = 101
    METHOD_NOT_ALLOWED = 102
    UNAUTHORIZED = 103
    CLIENT_CLOSED_REQUEST = 104
    INTERNAL = 105
    UNSUPPORTED_MEDIA_TYPE = 106
    FRAGMENT_MISSING = 107
    PERMISSION_DENIED = 108
    MESSAGE_DECODE_ERROR = 109
    REQUEST_TIMEOUT = 110
    RESOURCE_EXHAUSTED = 111  # out of file descriptors or disk: this request fails, retry later


HTTP_CODES: Mapping[Status, int] = MappingProxyType(
    {
        Status.OK: 200,
        Status.JOURNAL_NOT_FOUND: 404,
        Status.NO_JOURNAL_PRIMARY_BROKER: 503,
        Status.NOT_JOURNAL_PRIMARY_BROKER: 421,
        Status.INSUFFICIENT_JOURNAL_BROKERS: 503,
        Status.NOT_JOURNAL_BROKER: 421,
        Status.OFFSET_NOT_YET_AVAILABLE: 416,
        Status.WRONG_ROUTE: 409,
        Status.PROPOSAL_MISMATCH: 409,
        Status.ETCD_TRANSACTION_FAILED: 409,
        Status.NOT_ALLOWED: 403,
        Status.WRONG_APPEND_OFFSET: 409,
        Status.INDEX_HAS_GREATER_OFFSET: 409,
        Status.REGISTER_MISMATCH: 412,
        Status.SUSPENDED: 423,
        Status.FRAGMENT_STORE_UNHEALTHY: 503,
        Status.INVALID_ARGUMENT: 400,
        Status.PAYLOAD_TOO_LARGE: 413,
        Status.METHOD_NOT_ALLOWED: 405,
        Status.UNAUTHORIZED: 401,
        Status.CLIENT_CLOSED_REQUEST: 499,
        Status.INTERNAL: 500,
        Status.UNSUPPORTED_MEDIA_TYPE: 415,
        Status.FRAGMENT_MISSING: 410,
        Status.PERMISSION_DENIED: 403,
        Status.MESSAGE_DECODE_ERROR: 422,
        Status.REQUEST_TIMEOUT: 408,
        Status.RESOURCE_EXHAUSTED: 503,
    }
)


def join_field(prefix: str, field: str | None) -> str:
    """Join field path parts: ``join_field("fragment", "stores[0]")`` is
    ``fragment.stores[0]``; an index part (``[0]``) attaches without a dot."""
    if not field:
        return prefix
    if not prefix:
        return field
    return prefix + field if field.startswith("[") else f"{prefix}.{field}"


class HeraldError(Exception):
    """An error with a `Status`, a human message and an optional field path.

    `extra` holds status-specific data (a write head, current registers) that is
    sent alongside ``{status, message, field}`` and restored by `from_dict`.
    """

    def __init__(
        self,
        status: Status,
        message: str,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.extra: dict[str, Any] = dict(extra or {})

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status.name}, {str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclass constructors differ; rebuild from parts so errors pickle
        # (Spark ships task failures between processes).
        return (_rebuild, (type(self), self.status, self.message, self.field, self.extra))

    @property
    def http_code(self) -> int:
        return HTTP_CODES[self.status]

    def to_dict(self) -> dict[str, Any]:
        """The JSON error body: ``{status, message, field}`` plus `extra` keys."""
        out: dict[str, Any] = dict(self.extra)
        out.update(status=self.status.name, message=self.message, field=self.field)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeraldError:
        """Rebuild the typed error a server sent. Unknown statuses become INTERNAL
        so a newer server never crashes an older client."""
        try:
            status = Status[str(d.get("status", "INTERNAL"))]
        except KeyError:
            status = Status.INTERNAL
        extra = {k: v for k, v in d.items() if k not in ("status", "message", "field")}
        sub = _BY_STATUS.get(status, HeraldError)
        return _rebuild(sub, status, str(d.get("message", "")), d.get("field"), extra)

    def with_field_prefix(self, prefix: str) -> HeraldError:
        """Extend the field path in place (``stores[0]`` → ``fragment.stores[0]``)."""
        self.field = join_field(prefix, self.field)
        return self


def _rebuild(
    cls: type[HeraldError], status: Status, message: str, field: str | None, extra: dict[str, Any]
) -> HeraldError:
    err = cls.__new__(cls)
    HeraldError.__init__(err, status, message, field, extra)
    return err


class ValidationError(HeraldError, ValueError):
    """Bad input, rejected before any state changes. ``field`` is a dotted path.
    Also a ValueError: bad arguments to the pure layers (UUIDs, framings) are
    both, so ``except ValueError`` callers keep working."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(Status.INVALID_ARGUMENT, message, field or None)


class JournalNotFoundError(HeraldError):
    """The journal does not exist (or the caller may not see it)."""

    def __init__(self, journal: str) -> None:
        super().__init__(
            Status.JOURNAL_NOT_FOUND, f"journal not found: {journal}", extra={"journal": journal}
        )

    @property
    def journal(self) -> str | None:
        return self.extra.get("journal")


class RegisterMismatchError(HeraldError):
    """An append's ``check_registers`` did not match; carries the current registers
    as a ``[{name, value}]`` list ([I-REG-1])."""

    def __init__(self, message: str, registers: Any = None) -> None:
        if registers is not None and hasattr(registers, "to_list"):
            registers = registers.to_list()
        extra = {"registers": list(registers)} if registers is not None else {}
        super().__init__(Status.REGISTER_MISMATCH, message, extra=extra)

    @property
    def registers(self) -> Any:
        """Current registers as a `LabelSet` (None if the server sent none)."""
        from herald.protocol.labels import LabelSet  # labels imports this module.

        raw = self.extra.get("registers")
        return None if raw is None else LabelSet.from_list(raw)


class OffsetNotYetAvailableError(HeraldError):
    """A non-blocking read asked for an offset beyond the write head."""

    def __init__(self, message: str, write_head: int | None = None) -> None:
        extra = {"write_head": write_head} if write_head is not None else {}
        super().__init__(Status.OFFSET_NOT_YET_AVAILABLE, message, extra=extra)

    @property
    def write_head(self) -> int | None:
        return self.extra.get("write_head")


_BY_STATUS: dict[Status, type[HeraldError]] = {
    Status.INVALID_ARGUMENT: ValidationError,
    Status.JOURNAL_NOT_FOUND: JournalNotFoundError,
    Status.REGISTER_MISMATCH: RegisterMismatchError,
    Status.OFFSET_NOT_YET_AVAILABLE: OffsetNotYetAvailableError,
}


@contextlib.contextmanager
def with_field_prefix(prefix: str) -> Iterator[None]:
    """Prefix the field path of any `ValidationError` raised inside the block, so a
    nested ``validate()`` reports ``fragment.stores[0]`` rather than ``[0]``."""
    try:
        yield
    except ValidationError as err:
        err.with_field_prefix(prefix)
        raise
