"""GZIP fragments as RFC 1952 members, streaming: Gazette closes one member per
compression batch, so a decoder must go on past each member's end.

GZIP_OFFLOAD_DECOMPRESSION fragments are stored as gzip too and use these coders.
"""

from __future__ import annotations

import zlib

from herald.fragment.coder import CodecError

__all__ = ["GzipCompressor", "GzipDecompressor"]

GZIP_WBITS = 31  # zlib: 16 + 15 selects the gzip container.


class GzipCompressor:
    def __init__(self) -> None:
        self._z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, GZIP_WBITS)

    def update(self, chunk: bytes) -> bytes:
        return self._z.compress(chunk)

    def finish(self) -> bytes:
        return self._z.flush()


class GzipDecompressor:
    """Decodes consecutive gzip members: RFC 1952 allows them and Gazette writes them."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(GZIP_WBITS)
        self._in_member = False

    def update(self, chunk: bytes) -> bytes:
        out = []
        while chunk:
            self._in_member = True
            out.append(self._z.decompress(chunk))
            if not self._z.eof:
                break
            chunk = self._z.unused_data
            self._z = zlib.decompressobj(GZIP_WBITS)
            self._in_member = False
        return b"".join(out)

    def finish(self) -> bytes:
        if self._in_member:
            raise CodecError("GZIP: input ended inside a gzip member")
        return b""
