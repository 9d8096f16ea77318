"""What a reader does with bytes its journal's framing cannot decode.

Gazette's readers stop with a decode error; Herald does the same by default
(`OnDecodeError.FAIL`: `MessageDecodeError` names the journal and offset). A
pipeline that must keep going over known-bad data opts into
`OnDecodeError.SKIP`: the bad message is dropped and counted, and the caller
logs it. Either way, bad bytes never pass as a committed message. Pure: the
caller does the logging.

What is counted: one per `FramingError` the decoder reports — an NDJSON line
that is not a JSON object, a CSV record with the wrong field count, a bad
``UUID`` field, or (fixed framing) one run of bytes skipped to re-synchronise —
per reader (a CLI read, a ``read_committed`` call, a Spark task; a retried task
counts again). `DecodeErrors.statistics` is where the count is visible; there is
no Prometheus metric: readers are clients with no ``/metrics`` to scrape (the
brokers never decode messages), and Spark's Python data source API has no
custom-metric hook (an accumulator would need the driver's SparkContext, which
Spark Connect does not give).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from herald.message.framing import FramingError
from herald.protocol.errors import HeraldError, Status, ValidationError

__all__ = ["DecodeErrorStatistics", "DecodeErrors", "MessageDecodeError", "OnDecodeError"]


class OnDecodeError(str, enum.Enum):
    FAIL = "fail"
    SKIP = "skip"

    @classmethod
    def parse(cls, text: str | None, field: str = "onDecodeError") -> OnDecodeError:
        try:
            return cls((text or "fail").strip().lower())
        except ValueError:
            raise ValidationError(field, f"want fail or skip, got {text!r}") from None


class MessageDecodeError(HeraldError):
    """A message of ``journal`` at ``offset`` could not be decoded."""

    def __init__(self, journal: str, error: FramingError) -> None:
        reason = error.args[0].split(": ", 1)[-1]
        super().__init__(Status.MESSAGE_DECODE_ERROR,
                         f"offset {error.offset}: journal {journal}: {reason} "
                         "(read with on-decode-error=skip to drop and count such messages)",
                         extra={"journal": journal, "offset": error.offset})

    # Properties over ``extra``, so they survive pickling (Spark ships task errors).
    @property
    def journal(self) -> str:
        return str(self.extra["journal"])

    @property
    def offset(self) -> int:
        return int(self.extra["offset"])


@dataclass(frozen=True, slots=True)
class DecodeErrorStatistics:
    """What one reader skipped: how many messages, and the offsets of the first
    and last (-1 when none)."""

    journal: str
    policy: OnDecodeError
    skipped: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class DecodeErrors:
    """One reader's policy and count of skipped messages."""

    journal: str
    policy: OnDecodeError = OnDecodeError.FAIL
    skipped: int = 0
    first_offset: int = -1
    last_offset: int = -1

    def handle(self, error: FramingError) -> None:
        """Raise `MessageDecodeError` (FAIL), or count the skipped message (SKIP)."""
        if self.policy is OnDecodeError.FAIL:
            raise MessageDecodeError(self.journal, error) from None
        self.skipped += 1
        if self.first_offset < 0:
            self.first_offset = error.offset
        self.last_offset = error.offset

    def statistics(self) -> DecodeErrorStatistics:
        """A snapshot of the count so far (cheap; call it as often as you like)."""
        return DecodeErrorStatistics(self.journal, self.policy, self.skipped, self.first_offset,
                                     self.last_offset)
