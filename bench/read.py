"""Benchmark 3 — Read: sequential reads of a journal's persisted fragments, per
codec, and of a spool, each against a reference measured in the same run.

- SNAPPY and ZSTANDARD fragments (1 GiB; 256/128 MiB with --quick): through the
  broker, and with read offload (the client reads the fragment files itself, the
  broker only points at them), vs reading the same files and decompressing them
  directly into one reused buffer — the ceiling for any single-threaded Python
  reader of them. Through the broker, Herald's client asks for SNAPPY reads in
  their stored chunks and decodes them itself (`herald.broker.encoded_read`);
  ZSTANDARD fragments the broker decodes.
- NONE-codec fragments and a spool (content not yet persisted): the broker answers
  non-blocking reads of them with ``sendfile``. Timed with a bare socket receiver
  (what the broker sends) and with Herald's client, vs ``cat files > /dev/null``.

MB/s of journal content delivered. Every path reads from the page cache (the
journals fit in memory), so this measures software, not the disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.read_paths import cat_files, direct_snappy, direct_zstd, herald_read, raw_http_read
from bench.references import ndjson_body
from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import apply, bench_spec, herald_broker, wait_until

__all__ = ["run"]

APPEND_BYTES = 4 << 20
FRAGMENT_BYTES = 64 << 20
SPOOL_LENGTH_BYTES = 1 << 34  # never rolls during the bench: the content stays in the spool
UNITS = {"mb_per_s": "MB/s"}
DIRECT = {"SNAPPY": direct_snappy, "ZSTANDARD": direct_zstd}
REFERENCE = {"SNAPPY": "direct read+decompress+CRC", "ZSTANDARD": "direct read+decompress"}
"""Each codec's headline reference: what a correct reader of its files must do.
The broker checks every snappy chunk's CRC-32C, as the framing format asks and
Gazette's reader does; our zstd frames carry no checksum, so neither side checks
one. The SNAPPY reference without the CRCs is still measured, for continuity."""


def run(config: Config) -> Report:
    sizes = {"SNAPPY": config.scale(1 << 30, 256 << 20), "ZSTANDARD": config.scale(1 << 30, 128 << 20),
             "NONE": config.scale(1 << 30, 256 << 20), "spool": config.scale(512 << 20, 128 << 20)}
    report = Report("read", config, inputs={"journal_bytes": sizes, "fragment_length": FRAGMENT_BYTES,
                                            "store": "file://", "content": "NDJSON analytics-like events"})
    scratch = config.scratch("read")
    try:
        with herald_broker(scratch) as broker:
            systems: dict[str, Callable[[], dict[str, float]]] = {}
            for codec in ("SNAPPY", "ZSTANDARD"):
                end, paths = _fill_fragments(broker.url, codec, sizes[codec], broker.file_root)
                systems |= _compressed_systems(broker.url, codec, end, paths)
                report.inputs[f"{codec} fragments"] = len(paths)
            end, paths = _fill_fragments(broker.url, "NONE", sizes["NONE"], broker.file_root)
            systems |= _uncompressed_systems(broker.url, "NONE", _journal("NONE"), end, paths)
            end, paths = _fill_spool(broker.url, sizes["spool"], broker.data_dir)
            systems |= _uncompressed_systems(broker.url, "spool", _journal("spool"), end, paths)
            samples = measure_interleaved(config, systems)
    finally:
        remove_tree(scratch)
    for system, values in samples.items():
        report.add(system, "sequential", values, UNITS)
    _headlines(report, sizes)
    return report


def _headlines(report: Report, sizes: dict[str, int]) -> None:
    for codec in ("SNAPPY", "ZSTANDARD"):
        for how in ("broker", "offload"):
            report.headline(f"read {sizes[codec] >> 20} MiB from {codec} fragments, {how}: MB/s",
                            (f"{codec}: herald ({how})", "sequential", "mb_per_s"),
                            (f"{codec}: {REFERENCE[codec]}", "sequential", "mb_per_s"))
    for what, label in (("NONE", "NONE-codec fragments"), ("spool", "a spool")):
        report.headline(f"read {sizes[what] >> 20} MiB from {label}, broker zero-copy: MB/s",
                        (f"{what}: broker sendfile (bare receiver)", "sequential", "mb_per_s"),
                        (f"{what}: cat > /dev/null", "sequential", "mb_per_s"))


def _journal(what: str) -> str:
    return f"bench/read-{what.lower()}"


def _compressed_systems(url: str, codec: str, end: int, paths: list[Path]) -> dict:
    journal, direct = _journal(codec), DIRECT[codec]
    systems = {f"{codec}: herald (broker)": lambda: herald_read(url, journal, end, offload=False),
               f"{codec}: herald (offload)": lambda: herald_read(url, journal, end, offload=True),
               f"{codec}: direct read+decompress": lambda: direct(paths, end, FRAGMENT_BYTES + APPEND_BYTES)}
    if codec == "SNAPPY":
        systems[f"{codec}: {REFERENCE[codec]}"] = lambda: direct_snappy(paths, end, FRAGMENT_BYTES + APPEND_BYTES,
                                                                        check_crc=True)
    return systems


def _uncompressed_systems(url: str, what: str, journal: str, end: int, paths: list[Path]) -> dict:
    return {f"{what}: broker sendfile (bare receiver)": lambda: raw_http_read(url, journal, end),
            f"{what}: herald client (broker)": lambda: herald_read(url, journal, end, offload=False),
            f"{what}: cat > /dev/null": lambda: cat_files(paths, end)}


def _append(url: str, journal: str, total: int, roll: bool) -> None:
    from herald.client import BrokerClient

    body = ndjson_body(APPEND_BYTES)
    with BrokerClient(url, timeout_s=120) as client:
        written = 0
        while written < total:
            written = client.append(journal, body).end
        if roll:  # a last small append that rolls the last full fragment
            client.append(journal, b'{"roll":true}\n')


def _fill_fragments(url: str, codec: str, total: int, file_root: Path) -> tuple[int, list[Path]]:
    """Append ``total`` bytes in whole fragments of ``codec``, then wait until the
    fragments covering them are persisted."""
    from herald.client import BrokerClient

    journal = _journal(codec)
    # A spool rolls once it is *longer* than ``length``: one byte less makes
    # fragments of exactly FRAGMENT_BYTES from whole 4 MiB appends.
    apply(url, bench_spec(journal, length=FRAGMENT_BYTES - 1, compression_codec=codec))
    _append(url, journal, total, roll=True)
    with BrokerClient(url, timeout_s=120) as client:
        def persisted():
            frags = [i.fragment for i in client.fragments(journal)]
            done = [f for f in frags if f.store]
            end = max((f.end for f in done), default=0)
            return (end, done) if end >= total and len(done) == len(frags) - 1 else None

        end, done = wait_until(persisted, 300, f"{codec} fragments persisted", interval_s=0.2)
    return end, [file_root / f.content_path for f in sorted(done, key=lambda f: f.begin)]


def _fill_spool(url: str, total: int, data_dir: Path) -> tuple[int, list[Path]]:
    """Append ``total`` bytes to a journal whose spool never rolls in the bench."""
    journal = _journal("spool")
    apply(url, bench_spec(journal, length=SPOOL_LENGTH_BYTES, compression_codec="NONE"))
    _append(url, journal, total, roll=False)
    spools = [p for p in data_dir.rglob("*.spool") if p.stat().st_size >= total]
    if len(spools) != 1:
        raise RuntimeError(f"expected one spool of {total} bytes under {data_dir}, found {spools}")
    return total, spools
