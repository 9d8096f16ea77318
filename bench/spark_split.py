"""The batch read's partitioning, A/B in one Spark session: Spark-sized splits cut
inside fragments (the default) against one partition (``minPartitions=1``, the
packing of whole fragments up to 64 MiB that a 20 MB read used to get) and
Spark's ``text`` source over the same bytes, taking turns run by run after a
warm-up that starts both Python workers. Then, outside Spark, what a cut costs a
compressed fragment: the part after the cut decompresses from the fragment's start.

``python -m bench.spark_split [ROWS] [RUNS] [CODECS]`` (default 100000 7
NONE,SNAPPY,ZSTANDARD,GZIP);
prints medians and ranges; its scratch directory is removed at the end.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.runner import remove_tree
from bench.servers import herald_broker
from bench.spark import fill_journal, spark_session

JOURNAL = "bench/spark-split"


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _spark_ab(spark, url: str, text_dir: Path, rows: int, runs: int) -> None:
    def herald(**options: str):
        reader = spark.read.format("herald").option("broker", url).option("selector", f"name={JOURNAL}")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    cases = {"herald split": herald(), "herald 1 partition": herald(minPartitions="1"),
             "herald minPartitions=3": herald(minPartitions="3"), "spark text": spark.read.text(str(text_dir)),
             **{f"ceiling {n} partitions": spark.read.format("herald-ceiling").option("rows", rows)
                .option("partitions", n).load() for n in (1, 2)}}
    for name, df in cases.items():
        print(f"{name}: {df.rdd.getNumPartitions()} partitions", flush=True)
        df.write.format("noop").mode("overwrite").save()  # warm-up (both Python workers)
    got: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(runs):
        for name in names[i % len(names):] + names[:i % len(names)]:
            got[name].append(rows / _wall(lambda df=cases[name]: df.write.format("noop").mode("overwrite").save()))
    for name, values in got.items():
        print(f"{name}: median {statistics.median(values):,.0f} rows/s, range {min(values):,.0f}-{max(values):,.0f}")


def _copy(client, url: str, codec: str) -> str:
    """The read journal's bytes appended to a journal of ``codec`` (its first
    16 MiB fragment persisted)."""
    from bench.servers import bench_spec
    from herald.testing import apply_specs, wait_persisted

    journal = f"{JOURNAL}-{codec.lower()}"
    apply_specs(url, bench_spec(journal, length=16 << 20, compression_codec=codec))
    block = bytearray()
    for _, chunk in client.read(JOURNAL, 0):
        block += chunk
        if len(block) >= 4 << 20:
            client.append(journal, bytes(block[:block.rfind(b"\n") + 1]))
            del block[:block.rfind(b"\n") + 1]
    if block:
        client.append(journal, bytes(block))
    wait_persisted(client, journal, 1)
    return journal


def _scan(client, piece, head_cut: bool, read_to: int) -> int:
    from herald.message.decode_errors import DecodeErrors
    from herald.message.framing import NDJSONFraming
    from herald.spark.cuts import part_chunks
    from herald.spark.reading import scan_batches

    chunks = part_chunks(client, piece, head_cut, read_to)
    return sum(b.num_rows for b in scan_batches(chunks, piece.journal, NDJSONFraming(), DecodeErrors(piece.journal)))


def _cut_cost(url: str, codecs: list[str]) -> None:
    """Seconds to scan each part of the first fragment cut in two, alone (no Spark)."""
    from herald.client import BrokerClient
    from herald.spark.reading import Piece, plan_pieces

    with BrokerClient(url) as client:
        for codec in codecs:
            journal = _copy(client, url, codec)
            piece = plan_pieces(client, journal)[0]
            assert piece.fragment is not None
            mid = (piece.begin + piece.end) // 2
            parts = {"whole": (piece, False, 0),
                     "before cut": (Piece(journal, piece.begin, mid, piece.fragment), False, piece.end),
                     "after cut": (Piece(journal, mid, piece.end, piece.fragment), True, 0)}
            for name, (p, head, read_to) in parts.items():
                times = [_wall(lambda p=p, h=head, r=read_to: _scan(client, p, h, r)) for _ in range(5)]
                print(f"{codec}: scan {name} [{p.begin}, {p.end}): median {statistics.median(times) * 1000:.0f} ms, "
                      f"range {min(times) * 1000:.0f}-{max(times) * 1000:.0f}", flush=True)


def main(rows: int, runs: int, codecs: list[str]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="herald-bench-spark-split-"))
    try:
        with herald_broker(scratch) as broker:
            text_dir = fill_journal(broker.url, JOURNAL, rows, scratch)
            spark = spark_session()
            try:
                _spark_ab(spark, broker.url, text_dir, rows, runs)
            finally:
                spark.stop()
            _cut_cost(broker.url, codecs)
    finally:
        remove_tree(scratch)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]) if args else 100_000, int(args[1]) if len(args) > 1 else 7,
         args[2].split(",") if len(args) > 2 else ["NONE", "SNAPPY", "ZSTANDARD", "GZIP"])
