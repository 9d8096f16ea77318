"""What a reader does with bytes its journal's framing cannot decode.

Gazette's readers stop with a decode error; Herald does the same by default
(`OnDecodeError.FAIL`: `MessageDecodeError` names the journal and offset). A
pipeline that must keep going over known-bad data opts into
`OnDecodeError.SKIP`: the bad message is dropped and counted, and the caller
logs it. Either way, bad bytes never pass as a committed message. Pure: the
caller does the logging and the metrics.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from herald.message.framing import FramingError
from herald.protocol.errors import HeraldError, Status, ValidationError

__all__ = ["DecodeErrors", "MessageDecodeError", "OnDecodeError"]


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


@dataclass(slots=True)
class DecodeErrors:
    """One reader's policy and count of skipped messages."""

    journal: str
    policy: OnDecodeError = OnDecodeError.FAIL
    skipped: int = 0

    def handle(self, error: FramingError) -> None:
        """Raise `MessageDecodeError` (FAIL), or count the skipped message (SKIP)."""
        if self.policy is OnDecodeError.FAIL:
            raise MessageDecodeError(self.journal, error) from None
        self.skipped += 1
