"""What every fragment compression format's streaming coder is: the `Coder`
interface (``update(chunk)`` returns what it can, ``finish()`` the rest or a
`CodecError`), the error itself, and `Identity` for uncompressed fragments.

`herald.fragment.codecs` picks a coder per `CompressionCodec`; each format's
coders live in their own module (`gzip_members`, `snappy_framed`,
`zstd_frames`) because each cuts its stream by different rules.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["CodecError", "Coder", "Identity"]


class CodecError(ValueError):
    """Compressed bytes are corrupt or truncated, or the codec is not usable."""


class Coder(Protocol):
    def update(self, chunk: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class Identity:
    """The NONE codec: bytes pass through."""

    def update(self, chunk: bytes) -> bytes:
        return bytes(chunk)

    def finish(self) -> bytes:
        return b""
