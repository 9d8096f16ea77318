"""What Herald is compared with: the disk's own write+fdatasync limit, JetStream
stream set-up (via nats-py), Redis resets (via redis-py), and benchmark payloads."""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import time
from pathlib import Path

__all__ = ["dd_fdatasync_mb_per_s", "fdatasync_loop", "jetstream_stream", "ndjson_body", "redis_reset"]


def ndjson_body(size_bytes: int, seed: int = 1) -> bytes:
    """``size_bytes`` of newline-terminated JSON lines shaped like analytics events
    (compressible about as much as real ones; not one repeated line)."""
    rnd = random.Random(seed)
    lines, total = [], 0
    while total < size_bytes:
        line = (b'{"messageId":"%032x","type":"track","event":"Order %d","userId":"u%07d",'
                b'"properties":{"revenue":%d.%02d,"sku":"%s"}}\n'
                % (rnd.getrandbits(128), rnd.randrange(100), rnd.randrange(10**7), rnd.randrange(1000),
                   rnd.randrange(100), bytes(rnd.choices(b"ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", k=12))))
        lines.append(line)
        total += len(line)
    body = b"".join(lines)[:size_bytes]
    return body[:-1] + b"\n"


def fdatasync_loop(directory: Path, size_bytes: int, duration_s: float) -> dict[str, float]:
    """One writer appending ``size_bytes`` and fdatasyncing after each write, as fast
    as the disk lets it: the ceiling of an append that waits for its own sync."""
    path = directory / "fdatasync-loop"
    body = ndjson_body(size_bytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    latencies: list[float] = []
    try:
        start = time.perf_counter()
        while (now := time.perf_counter()) - start < duration_s:
            os.write(fd, body)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - now)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    latencies.sort()
    n = len(latencies)
    return {"appends_per_s": n / elapsed, "mb_per_s": n * size_bytes / elapsed / 1e6,
            "p50_ms": latencies[n // 2] * 1e3, "p99_ms": latencies[min(n - 1, int(n * 0.99))] * 1e3}


def dd_fdatasync_mb_per_s(directory: Path, size_mib: int) -> float:
    """``dd bs=1M conv=fdatasync``: bulk sequential write throughput, one sync at the end."""
    path = directory / "dd-probe"
    try:
        out = subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={size_mib}",
                              "conv=fdatasync"], check=False, capture_output=True, text=True, timeout=300)
    finally:
        path.unlink(missing_ok=True)
    m = re.search(r"copied, ([\d.]+) s", out.stderr)
    if not m:
        raise RuntimeError(f"dd printed no timing: {out.stderr}")
    return size_mib * (1 << 20) / float(m.group(1)) / 1e6


def jetstream_stream(url: str, name: str, subjects: list[str], max_bytes: int) -> None:
    """(Re)create a file-storage stream: purged, bounded by bytes (old messages go)."""
    asyncio.run(_jetstream_stream(url, name, subjects, max_bytes))


async def _jetstream_stream(url: str, name: str, subjects: list[str], max_bytes: int) -> None:
    import nats
    from nats.js.api import DiscardPolicy, StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        try:
            await js.delete_stream(name)
        except NotFoundError:
            pass
        await js.add_stream(StreamConfig(name=name, subjects=subjects, storage=StorageType.FILE,
                                         max_bytes=max_bytes, discard=DiscardPolicy.OLD))
    finally:
        await nc.close()


def redis_reset(port: int) -> None:
    """Drop every key (so a run starts from an empty stream)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        client.flushall()
    finally:
        client.close()
