"""`AckIntent`: a transaction's ACK, framed, waiting to be appended.

Its own module (no numpy, unlike `herald.message.publisher`, which stamps in bulk)
because a Spark sink's commit runner builds and appends intents and nothing
else: importing the publisher there cost a fresh process numpy (issue 15).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AckIntent"]


@dataclass(frozen=True, slots=True)
class AckIntent:
    """A framed ACK message to append to ``journal`` once the checkpoint holding
    it has committed."""

    journal: str
    data: bytes
