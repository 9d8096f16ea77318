"""The readers benchmark 3 (`bench.read`) times: Herald's client through the broker or
with read offload, a bare HTTP receiver that shows what the broker alone sends, and
the references — reading and decompressing the fragment files directly, and
``cat file > /dev/null`` for uncompressed files. Each returns ``{"mb_per_s": …}``
and checks it got every byte.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import cramjam
import crc32c

from herald.fragment.zstd_frames import ZstdFrameScanner

__all__ = ["cat_files", "direct_snappy", "direct_zstd", "herald_read", "raw_http_read"]

RECV_BYTES = 4 << 20


def herald_read(url: str, journal: str, end: int, offload: bool) -> dict[str, float]:
    """Herald's own reader (`RetryReader`), non-blocking, from offset 0 to ``end``."""
    from herald.client import BrokerClient, RetryReader

    with BrokerClient(url, timeout_s=120) as client:
        start = time.perf_counter()
        got = 0
        with RetryReader(client, journal, 0, block=False, end_offset=end, offload=offload) as reader:
            for _, chunk in reader:
                got += len(chunk)
        elapsed = time.perf_counter() - start
    return _rate(got, end, elapsed)


def raw_http_read(url: str, journal: str, end: int) -> dict[str, float]:
    """One GET read by a bare socket into one reused buffer: what the broker sends,
    with no HTTP client's cost on top. Needs a ``Content-Length`` answer (a
    zero-copy read) — a chunked one fails loudly, as it would not be zero-copy."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        start = time.perf_counter()
        sock.sendall(f"GET /{journal}?offset=0&end_offset={end} HTTP/1.1\r\nHost: bench\r\n"
                     "Connection: close\r\n\r\n".encode())
        head, body_got = _read_head(sock)
        length = _content_length(head)
        buf = memoryview(bytearray(RECV_BYTES))
        while body_got < length:
            n = sock.recv_into(buf)
            if not n:
                break
            body_got += n
        elapsed = time.perf_counter() - start
    return _rate(body_got, end, elapsed)


def _read_head(sock: socket.socket) -> tuple[bytes, int]:
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise RuntimeError("connection closed before the response head")
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, len(rest)


def _content_length(head: bytes) -> int:
    status = head.split(b"\r\n", 1)[0]
    if b" 206 " not in status:
        raise RuntimeError(f"read answered {status!r}")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise RuntimeError("the read was not answered with a Content-Length (not zero-copy)")


def cat_files(paths: list[Path], end: int) -> dict[str, float]:
    """``cat`` the files to /dev/null: the OS's own page-cache-to-somewhere speed."""
    start = time.perf_counter()
    with open("/dev/null", "wb") as null:
        subprocess.run(["cat", *map(str, paths)], stdout=null, check=True)
    elapsed = time.perf_counter() - start
    del end  # a spool file may be longer than its committed content
    return {"mb_per_s": sum(p.stat().st_size for p in paths) / elapsed / 1e6}


def direct_snappy(paths: list[Path], end: int, out_bytes: int, check_crc: bool = False) -> dict[str, float]:
    """Framed snappy files, each chunk's raw block decompressed into one reused
    buffer: the ceiling for any Python reader of these bytes. With ``check_crc``
    each chunk's CRC-32C is checked too, as a correct reader (the broker,
    Gazette's) must: 0.035-0.04 ms more CPU per MiB, 8-9% of the decode."""
    start = time.perf_counter()
    out = memoryview(bytearray(out_bytes))
    got = 0
    for path in paths:
        got += _snappy_framed_into(path.read_bytes(), out, check_crc)
    return _rate(got, end, time.perf_counter() - start)


def _snappy_framed_into(data: bytes, out: memoryview, check_crc: bool) -> int:
    """Framed snappy → ``out``: chunk type, 3-byte length, 4-byte CRC, body."""
    view, pos, n = memoryview(data), 0, 0
    while pos < len(data):
        kind, length = data[pos], int.from_bytes(data[pos + 1:pos + 4], "little")
        body, at = view[pos + 8:pos + 4 + length], n
        if kind == 0x00:
            n += cramjam.snappy.decompress_raw_into(body, out[n:])
        elif kind == 0x01:
            out[n:n + len(body)] = body
            n += len(body)
        if check_crc and kind <= 0x01 and _masked_crc(out[at:n]) != int.from_bytes(data[pos + 4:pos + 8], "little"):
            raise RuntimeError(f"snappy chunk CRC mismatch at byte {pos}")
        pos += 4 + length
    return n


def _masked_crc(data: memoryview) -> int:
    """The framing format's masked CRC-32C of ``data``."""
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def direct_zstd(paths: list[Path], end: int, out_bytes: int) -> dict[str, float]:
    """zstd files decompressed frame by frame into one reused buffer."""
    start = time.perf_counter()
    out = memoryview(bytearray(out_bytes))
    got = 0
    for path in paths:
        data = bytearray(path.read_bytes())
        view, pos, n = memoryview(data), 0, 0
        while pos < len(data):
            length = _zstd_frame_length(data, pos)
            n += cramjam.zstd.decompress_into(view[pos:pos + length], out[n:])
            pos += length
        got += n
    return _rate(got, end, time.perf_counter() - start)


def _zstd_frame_length(data: bytearray, pos: int) -> int:
    scanner = ZstdFrameScanner()
    with memoryview(data) as view:
        end = scanner.frame_end(view[pos:])  # type: ignore[arg-type]  # bytes-like
    if end is None:
        raise RuntimeError("truncated zstd frame")
    return end


def _rate(got: int, expected: int, elapsed_s: float) -> dict[str, float]:
    if got != expected:
        raise RuntimeError(f"read {got} bytes, expected {expected}")
    return {"mb_per_s": got / elapsed_s / 1e6}
