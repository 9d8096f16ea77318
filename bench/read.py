"""Benchmark 3 — Read: a sequential read of a 1 GiB journal (256 MiB with --quick)
from persisted SNAPPY fragments, through the broker and with read offload (the
client reads the fragment files itself, the broker only points at them): MB/s of
journal content delivered.

Reference, same run: reading the same fragment files and decompressing them
directly, one after another — each framed-snappy chunk's raw block decompressed by
cramjam into one preallocated buffer, CRCs unchecked: the ceiling for any Python
reader of these bytes. ``cramjam.snappy.decompress`` of whole files is shown too.
Every path reads from the page cache (the journal fits in memory), so this
measures software, not the disk.
"""

from __future__ import annotations

import time
from pathlib import Path

import cramjam

from bench.references import ndjson_body
from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker, wait_until

__all__ = ["run"]

APPEND_BYTES = 4 << 20
FRAGMENT_BYTES = 64 << 20
UNITS = {"mb_per_s": "MB/s"}


def run(config: Config) -> Report:
    total = config.scale(1 << 30, 256 << 20)
    report = Report("read", config, inputs={"journal_bytes": total, "fragment_length": FRAGMENT_BYTES,
                                            "codec": "SNAPPY (framed)", "store": "file://",
                                            "content": "NDJSON analytics-like events"})
    scratch = config.scratch("read")
    journal = "bench/read"
    try:
        with herald_broker(scratch) as broker:
            # A spool rolls once it is *longer* than ``length``: one byte less makes
            # fragments of exactly FRAGMENT_BYTES from whole 4 MiB appends.
            apply(broker.url, bench_spec(journal, length=FRAGMENT_BYTES - 1))
            persisted_end, paths = _fill(broker.url, journal, total, broker.file_root)
            report.inputs["persisted_bytes"] = persisted_end
            report.inputs["fragments"] = len(paths)
            samples = measure_interleaved(config, {
                "herald (broker)": lambda: _read(broker.url, journal, persisted_end, offload=False),
                "herald (offload)": lambda: _read(broker.url, journal, persisted_end, offload=True),
                "direct read+decompress": lambda: _direct_raw(paths, persisted_end),
                "direct cramjam.snappy.decompress": lambda: _direct(paths, persisted_end),
            })
    finally:
        remove_tree(scratch)
    for system, values in samples.items():
        report.add(system, "sequential", values, UNITS)
    for system in ("herald (broker)", "herald (offload)"):
        report.headline(f"read {total >> 20} MiB from SNAPPY fragments, {system.split('(')[1][:-1]}: MB/s",
                        (system, "sequential", "mb_per_s"), ("direct read+decompress", "sequential", "mb_per_s"))
    return report


def _fill(url: str, journal: str, total: int, file_root: Path) -> tuple[int, list[Path]]:
    """Append ``total`` bytes (plus a last small append that rolls the last full
    fragment), then wait until the fragments covering them are persisted."""
    from herald.client import BrokerClient

    body = ndjson_body(APPEND_BYTES)
    with BrokerClient(url, timeout_s=120) as client:
        written = 0
        while written < total:
            written = client.append(journal, body).end
        client.append(journal, b'{"roll":true}\n')

        def persisted():
            frags = [i.fragment for i in client.fragments(journal)]
            done = [f for f in frags if f.store]
            end = max((f.end for f in done), default=0)
            return (end, done) if end >= total and len(done) == len(frags) - 1 else None

        end, done = wait_until(persisted, 300, "fragments persisted", interval_s=0.2)
    return end, [file_root / f.content_path for f in sorted(done, key=lambda f: f.begin)]


def _read(url: str, journal: str, end: int, offload: bool) -> dict[str, float]:
    from herald.client import BrokerClient, RetryReader

    with BrokerClient(url, timeout_s=120) as client:
        start = time.perf_counter()
        got = 0
        with RetryReader(client, journal, 0, block=False, end_offset=end, offload=offload) as reader:
            for _, chunk in reader:
                got += len(chunk)
        elapsed = time.perf_counter() - start
    if got != end:
        raise RuntimeError(f"read {got} bytes, expected {end}")
    return {"mb_per_s": got / elapsed / 1e6}


def _direct(paths: list[Path], end: int) -> dict[str, float]:
    start = time.perf_counter()
    got = 0
    for path in paths:
        got += len(cramjam.snappy.decompress(path.read_bytes()))
    elapsed = time.perf_counter() - start
    if got != end:
        raise RuntimeError(f"decompressed {got} bytes, expected {end}")
    return {"mb_per_s": got / elapsed / 1e6}


def _direct_raw(paths: list[Path], end: int) -> dict[str, float]:
    start = time.perf_counter()
    out = bytearray(FRAGMENT_BYTES + APPEND_BYTES)
    got = 0
    for path in paths:
        got += _decompress_framed_into(path.read_bytes(), out)
    elapsed = time.perf_counter() - start
    if got != end:
        raise RuntimeError(f"decompressed {got} bytes, expected {end}")
    return {"mb_per_s": got / elapsed / 1e6}


def _decompress_framed_into(data: bytes, out: bytearray) -> int:
    """Framed snappy → ``out``: chunk type, 3-byte length, 4-byte CRC, body."""
    view, pos, n = memoryview(data), 0, 0
    while pos < len(data):
        kind, length = data[pos], int.from_bytes(data[pos + 1:pos + 4], "little")
        body = view[pos + 8:pos + 4 + length]
        if kind == 0x00:
            n += cramjam.snappy.decompress_raw_into(body, memoryview(out)[n:])
        elif kind == 0x01:
            out[n:n + len(body)] = body
            n += len(body)
        pos += 4 + length
    return n
