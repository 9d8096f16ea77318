"""Benchmark 7 — Journals: what each served journal costs one broker (issue 19 §1).

For 200, 1,000, 5,000 and 10,000 journals (quick: 200 and 1,000), a fresh embedded
broker under ``ulimit -n 1024`` (soft = hard, so its raise to the hard limit does
nothing) is given every journal in one apply; then one record is appended to each.
Measured: RSS per idle journal (RSS after the apply minus before, ÷ journals),
descriptors (``/proc/<pid>/fd``) idle and after the appends, fan-out appends/s
(one record to every journal, 8 writers), append p50 over journals spread across
all of them (so most need their spool reopened), and the restart time after
``kill -9`` (until the broker serves every journal again).

Per-append cost is compared *paired*: a broker with 200 journals and one with
5,000 (quick: 1,000) run side by side and take turns, round by round, at the same
load (a p50 over appends spread across all their journals, and fan-out appends/s
over the same number of appends), so a noisy minute on the shared machine hits
both alike. The issue's target is ≥ 0.8× of the 200-journal figures.

The reference for each row is the 200-journal row. Also writes
``journals-scale.png`` (RSS, descriptors, restart time, append p50 vs N).
``python -m bench.journals 20000 50000`` measures further counts once and prints
their figures (the probe of the 100,000-journal goal; slow, not in ``make bench``).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import bench_spec
from herald.testing import BrokerProcess

__all__ = ["JOURNAL_COUNTS", "measure_count", "measure_paired", "run"]

JOURNAL_COUNTS = (200, 1000, 5000, 10000)
QUICK_COUNTS = (200, 1000)
PAIRED_COUNT, QUICK_PAIRED_COUNT = 5000, 1000
PAIRED_ROUNDS, QUICK_PAIRED_ROUNDS = 6, 3
OPEN_FILES_LIMIT = 1024
LATENCY_SAMPLES = 200
FANOUT_APPENDS = 2000  # per paired round and broker
WORKERS = 8
BODY = b'{"n": 1, "pad": "' + b"x" * 44 + b'"}\n'
UNITS = {"rss_per_journal_kib": "KiB", "rss_mib": "MiB", "fds_idle": "fds", "fds_after_appends": "fds",
         "append_p50_ms": "ms", "fanout_appends_per_s": "appends/s", "apply_s": "s", "restart_s": "s"}


def run(config: Config) -> Report:
    counts = QUICK_COUNTS if config.quick else JOURNAL_COUNTS
    paired = QUICK_PAIRED_COUNT if config.quick else PAIRED_COUNT
    rounds = QUICK_PAIRED_ROUNDS if config.quick else PAIRED_ROUNDS
    report = Report("journals", config, inputs={
        "journal_counts": counts, "ulimit_n": OPEN_FILES_LIMIT, "latency_samples": LATENCY_SAMPLES,
        "append_bytes": len(BODY), "paired": [counts[0], paired], "paired_rounds": rounds,
        "fanout_appends": FANOUT_APPENDS, "writers": WORKERS})

    def once(n: int):
        def measure_once() -> dict[str, float]:
            scratch = config.scratch("journals")
            try:
                return measure_count(scratch, n, OPEN_FILES_LIMIT)
            finally:
                remove_tree(scratch)
        return measure_once

    # Counts take turns run by run, so a noisy minute does not land on one count only.
    samples = measure_interleaved(config, {_case(n): once(n) for n in counts}, runs=2)
    for count in counts:
        report.add("herald", _case(count), samples[_case(count)], UNITS)
    scratch = config.scratch("journals-paired")
    try:
        pair = measure_paired(scratch, counts[0], paired, rounds)
    finally:
        remove_tree(scratch)
    for count in (counts[0], paired):
        report.add("herald", _paired_case(count), pair[count], UNITS)
    for count in counts[1:]:
        for metric in ("rss_per_journal_kib", "fds_after_appends", "restart_s"):
            report.headline(f"{metric} at {count} journals vs {counts[0]}",
                            ("herald", _case(count), metric), ("herald", _case(counts[0]), metric))
    for metric in ("append_p50_ms", "fanout_appends_per_s"):
        report.headline(f"{metric} at {paired} journals vs {counts[0]} (paired)",
                        ("herald", _paired_case(paired), metric), ("herald", _paired_case(counts[0]), metric))
    report.note(f"Broker under ulimit -n {OPEN_FILES_LIMIT} (soft = hard); spool descriptors pooled "
                "(herald.fragment.fdpool), so fds stay bounded whatever the journal count.")
    report.note(f"Paired: brokers with {counts[0]} and {paired} journals side by side, taking turns for "
                f"{rounds} rounds; each round's p50 and appends/s is one run.")
    _plot_lines(report, counts, config.results_dir)
    return report


def measure_count(scratch: Path, count: int, open_files_limit: int | None) -> dict[str, float]:
    """One fresh broker with ``count`` journals: the figures of one run. Blocking."""
    broker = BrokerProcess(scratch / "data", scratch / "fragments", "--log.level", "warning",
                           open_files_limit=open_files_limit)
    broker.start()
    try:
        names = _names(count)
        rss_before = _rss_kib(broker)
        apply_s = _apply(broker, names)
        rss_idle, fds_idle = _rss_kib(broker), _fds(broker)
        fanout = _fanout_appends_per_s(broker.url, names, len(names))
        fds_after = _fds(broker)
        p50_ms = _append_p50_ms(broker.url, names)
        rss_after = _rss_kib(broker)
        broker.kill()
        start = time.perf_counter()
        broker.start(broker.port)  # ready once every journal is served again
        restart_s = time.perf_counter() - start
        return {"rss_per_journal_kib": (rss_idle - rss_before) / count, "rss_mib": rss_after / 1024,
                "fds_idle": fds_idle, "fds_after_appends": fds_after, "append_p50_ms": p50_ms,
                "fanout_appends_per_s": fanout, "apply_s": apply_s, "restart_s": restart_s}
    finally:
        broker.kill()


def measure_paired(scratch: Path, small: int, large: int, rounds: int) -> dict[int, dict[str, list[float]]]:
    """Brokers with ``small`` and ``large`` journals side by side, taking turns each
    round (the order alternating): per round and broker, the append p50 over
    journals spread across all of them and fan-out appends/s. Blocking."""
    brokers = {n: BrokerProcess(scratch / f"d{n}", scratch / f"f{n}", "--log.level", "warning",
                                open_files_limit=OPEN_FILES_LIMIT) for n in (small, large)}
    try:
        for count, broker in brokers.items():
            broker.start()
            _apply(broker, _names(count))
            _fanout_appends_per_s(broker.url, _names(count), count)  # every spool created once
        out: dict[int, dict[str, list[float]]] = {n: {} for n in brokers}
        order = list(brokers)
        for i in range(rounds):
            for count in order[i % 2:] + order[:i % 2]:
                url, names = brokers[count].url, _names(count)
                figures = {"append_p50_ms": _append_p50_ms(url, names),
                           "fanout_appends_per_s": _fanout_appends_per_s(url, names, FANOUT_APPENDS)}
                for metric, value in figures.items():
                    out[count].setdefault(metric, []).append(value)
        return out
    finally:
        for broker in brokers.values():
            broker.kill()


def _names(count: int) -> list[str]:
    return [f"bench/many-{i:06d}" for i in range(count)]


def _apply(broker: BrokerProcess, names: list[str]) -> float:
    start = time.perf_counter()
    resp = httpx.post(f"{broker.url}/v1/journals/apply", timeout=600,
                      json={"changes": [{"upsert": bench_spec(n)} for n in names]})
    resp.raise_for_status()
    return time.perf_counter() - start


def _fanout_appends_per_s(url: str, names: list[str], appends: int) -> float:
    """``appends`` records, each to the next journal in turn (cycling), 8 writers."""
    picks = list(itertools.islice(itertools.cycle(names), appends))
    with httpx.Client(base_url=url, timeout=60) as http, ThreadPoolExecutor(WORKERS) as pool:
        start = time.perf_counter()
        for resp in pool.map(lambda n: http.put(f"/{n}", content=BODY), picks):
            resp.raise_for_status()
        return appends / (time.perf_counter() - start)


def _append_p50_ms(url: str, names: list[str]) -> float:
    """One writer, appends to journals spread evenly over all of them."""
    step = max(1, len(names) // LATENCY_SAMPLES)
    picks = [names[(i * step) % len(names)] for i in range(LATENCY_SAMPLES)]
    latencies = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for name in picks:
            start = time.perf_counter()
            http.put(f"/{name}", content=b'{"n": 2}\n').raise_for_status()
            latencies.append((time.perf_counter() - start) * 1000)
    return statistics.median(latencies)


def _rss_kib(broker: BrokerProcess) -> float:
    with open(f"/proc/{broker.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    return float("nan")


def _fds(broker: BrokerProcess) -> float:
    return float(len(os.listdir(f"/proc/{broker.proc.pid}/fd")))


def _case(count: int) -> str:
    return f"{count} journals"


def _paired_case(count: int) -> str:
    return f"{count} journals (paired)"


def _plot_lines(report: Report, counts: tuple[int, ...], results_dir: Path) -> None:
    """``journals-scale.png``: RSS, descriptors, restart time and append p50 vs journals."""
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = ("rss_mib", "fds_after_appends", "restart_s", "append_p50_ms")
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for ax, metric in zip(axes, panels):
        figs = [report.figure("herald", _case(c), metric) for c in counts]
        ys = [f.median if f else float("nan") for f in figs]
        ax.plot(counts, ys, marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("journals")
        ax.set_ylabel(f"{metric} ({UNITS[metric]})")
        ax.set_title(metric)
        ax.set_ylim(bottom=0)
    fig.suptitle(f"one broker, ulimit -n {OPEN_FILES_LIMIT}")
    fig.tight_layout()
    results_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(results_dir / "journals-scale.png", dpi=90)
    plt.close(fig)


def main(argv: list[str]) -> None:
    """``python -m bench.journals N ...``: one run per count, figures printed as JSON."""
    import tempfile

    from herald.testing import broker as testing_broker

    testing_broker.START_DEADLINE_S = 300.0  # a restart over 50,000 journals may take over 30 s
    for count in map(int, argv):
        scratch = Path(tempfile.mkdtemp(prefix="herald-bench-journals-"))
        try:
            start = time.perf_counter()
            figures = measure_count(scratch, count, OPEN_FILES_LIMIT)
            figures["elapsed_s"] = time.perf_counter() - start
        finally:
            remove_tree(scratch)
        print(json.dumps({"journals": count, **{k: round(v, 3) for k, v in figures.items()}}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
