"""ZSTANDARD fragments as independent zstd frames, streaming: the decoder finds
frame boundaries from frame and block headers (RFC 8878) and decodes each whole
frame, so its memory is bounded by the writer's frame size.
"""

from __future__ import annotations

import cramjam

from herald.fragment.coder import CodecError

__all__ = ["ZSTD_FRAME_INPUT_BYTES", "ZSTD_LEVEL", "ZstdCompressor", "ZstdDecompressor", "ZstdFrameScanner"]

ZSTD_FRAME_INPUT_BYTES = 4 << 20
"""We end a zstd frame every 4 MiB of input: the streaming decoder can only hand a
complete frame to cramjam, so bounded frames keep its memory bounded."""
ZSTD_LEVEL = 3
ZSTD_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)


class ZstdCompressor:
    """Writes independent frames of at most `ZSTD_FRAME_INPUT_BYTES` input each."""

    def __init__(self) -> None:
        self.frame_input_bytes = ZSTD_FRAME_INPUT_BYTES
        self._buf = bytearray()
        self._wrote_frame = False

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        out = []
        size = self.frame_input_bytes
        while len(self._buf) >= size:
            out.append(self._frame(bytes(self._buf[:size])))
            del self._buf[:size]
        return b"".join(out)

    def finish(self) -> bytes:
        if self._buf or not self._wrote_frame:  # Empty input still makes one valid frame.
            out = self._frame(bytes(self._buf))
            self._buf.clear()
            return out
        return b""

    def _frame(self, data: bytes) -> bytes:
        self._wrote_frame = True
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


class ZstdDecompressor:
    """Finds frame boundaries from frame and block headers (RFC 8878) without
    decompressing, then decompresses each complete frame. Memory is bounded by the
    writer's frame size: ours are small, Gazette's are a whole fragment."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanner = ZstdFrameScanner()

    def update(self, chunk: bytes) -> bytes:
        self._buf += chunk
        out = []
        while (end := self._scanner.frame_end(self._buf)) is not None:
            if not self._scanner.skippable:
                out.append(self._frame(end, self._scanner.content_size))
            del self._buf[:end]
            self._scanner = ZstdFrameScanner()
        return out[0] if len(out) == 1 else b"".join(out)

    def _frame(self, end: int, content_size: int | None) -> bytes:
        """Decode the frame in ``buf[:end]``: into a bytearray of exactly its size
        when its header says the size (ours always do), else via cramjam's buffer."""
        with memoryview(self._buf) as view:
            if content_size is None:
                return bytes(cramjam.zstd.decompress(view[:end]))
            out = bytearray(content_size)
            if content_size and cramjam.zstd.decompress_into(view[:end], out) != content_size:
                raise CodecError(f"ZSTANDARD: frame holds other than the {content_size} bytes it declares")
            return out  # type: ignore[return-value]  # bytes-like, and the caller's to keep

    def finish(self) -> bytes:
        if self._buf:
            raise CodecError(f"ZSTANDARD: input ended inside a frame ({len(self._buf)} bytes left)")
        return b""


class ZstdFrameScanner:
    """Resumable scan of the frame at the start of a buffer; `frame_end` returns its
    length once complete, else None (call again with more bytes)."""

    def __init__(self) -> None:
        self.skippable = False
        self.content_size: int | None = None  # From the frame header, when it holds one.
        self._cursor: int | None = None  # Offset of the next block header, once known.
        self._trailer = 0  # Content checksum bytes after the last block.
        self._end: int | None = None  # Known frame length (after the last block).

    def frame_end(self, buf: bytearray) -> int | None:
        if self._end is None and self._cursor is None and not self._read_header(buf):
            return None
        while self._end is None:
            if self._cursor + 3 > len(buf):
                return None
            head = int.from_bytes(buf[self._cursor:self._cursor + 3], "little")
            block_type, block_size = (head >> 1) & 3, head >> 3
            if block_type == 3:
                raise CodecError("ZSTANDARD: reserved block type")
            self._cursor += 3 + (1 if block_type == 1 else block_size)
            if head & 1:
                self._end = self._cursor + self._trailer
        return self._end if self._end <= len(buf) else None

    def _read_header(self, buf: bytearray) -> bool:
        if len(buf) < 8:
            return False
        magic = int.from_bytes(buf[0:4], "little")
        if magic in ZSTD_SKIPPABLE:
            self.skippable = True
            self._end = 8 + int.from_bytes(buf[4:8], "little")
            return True
        if magic != ZSTD_MAGIC:
            raise CodecError(f"ZSTANDARD: bad frame magic {magic:#x}")
        descriptor = buf[4]
        single_segment = (descriptor >> 5) & 1
        content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
        dictionary_bytes = (0, 1, 2, 4)[descriptor & 3]
        header_end = 5 + (1 - single_segment) + dictionary_bytes + content_size_bytes
        if len(buf) < header_end:
            return False  # wait for the whole header: its content size lets a reader decode into place
        self._trailer = 4 if descriptor & 4 else 0
        self._cursor = header_end
        if content_size_bytes:
            size = int.from_bytes(buf[header_end - content_size_bytes:header_end], "little")
            self.content_size = size + 256 if content_size_bytes == 2 else size
        return True
