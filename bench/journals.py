"""Benchmark 7 — Journals: what each served journal costs one broker (issue 19 §1).

For 100, 1,000, 5,000 and 10,000 journals (quick: 100 and 1,000), a fresh embedded
broker under ``ulimit -n 1024`` (soft = hard, so its raise to the hard limit does
nothing) is given every journal in one apply; then one record is appended to each.
Measured: RSS per idle journal (RSS after the apply minus before, ÷ journals),
descriptors (``/proc/<pid>/fd``) idle and after the appends, append p50 over
journals spread across all of them (so most need their spool reopened), and the
restart time after ``kill -9`` (until the broker serves every journal again).
The reference for each row is the 100-journal row, so ratios read as "cost at N
journals relative to 100". Also writes ``journals-scale.png`` (all four vs N).
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.runner import Config, Report, measure, remove_tree
from bench.servers import bench_spec
from herald.testing import BrokerProcess

__all__ = ["JOURNAL_COUNTS", "measure_count", "run"]

JOURNAL_COUNTS = (100, 1000, 5000, 10000)
QUICK_COUNTS = (100, 1000)
OPEN_FILES_LIMIT = 1024
LATENCY_SAMPLES = 200
WORKERS = 8
UNITS = {"rss_per_journal_kib": "KiB", "rss_mib": "MiB", "fds_idle": "fds", "fds_after_appends": "fds",
         "append_p50_ms": "ms", "apply_s": "s", "restart_s": "s"}


def run(config: Config) -> Report:
    counts = QUICK_COUNTS if config.quick else JOURNAL_COUNTS
    report = Report("journals", config, inputs={"journal_counts": counts, "ulimit_n": OPEN_FILES_LIMIT,
                                                "latency_samples": LATENCY_SAMPLES, "append_bytes": 64})
    runs = 1 if config.quick else 2
    for count in counts:
        def once(n=count) -> dict[str, float]:
            scratch = config.scratch("journals")
            try:
                return measure_count(scratch, n, OPEN_FILES_LIMIT)
            finally:
                remove_tree(scratch)
        report.add("herald", _case(count), measure(config, once, runs=runs), UNITS)
    for count in counts[1:]:
        for metric in ("rss_per_journal_kib", "append_p50_ms", "fds_after_appends"):
            report.headline(f"{metric} at {count} journals vs {counts[0]}",
                            ("herald", _case(count), metric), ("herald", _case(counts[0]), metric))
    report.note(f"Broker under ulimit -n {OPEN_FILES_LIMIT} (soft = hard); spool descriptors pooled "
                "(herald.fragment.fdpool), so fds stay bounded whatever the journal count.")
    _plot_lines(report, counts, config.results_dir)
    return report


def measure_count(scratch: Path, count: int, open_files_limit: int | None) -> dict[str, float]:
    """One fresh broker with ``count`` journals: the figures of one run. Blocking."""
    broker = BrokerProcess(scratch / "data", scratch / "fragments", "--log.level", "warning",
                           open_files_limit=open_files_limit)
    broker.start()
    try:
        names = [f"bench/many-{i:06d}" for i in range(count)]
        rss_before = _rss_kib(broker)
        start = time.perf_counter()
        resp = httpx.post(f"{broker.url}/v1/journals/apply", timeout=600,
                          json={"changes": [{"upsert": bench_spec(n)} for n in names]})
        resp.raise_for_status()
        apply_s = time.perf_counter() - start
        rss_idle, fds_idle = _rss_kib(broker), _fds(broker)
        _append_each(broker.url, names)
        fds_after = _fds(broker)
        p50_ms = _append_p50_ms(broker.url, names)
        rss_after = _rss_kib(broker)
        broker.kill()
        start = time.perf_counter()
        broker.start(broker.port)  # ready once every journal is served again
        restart_s = time.perf_counter() - start
        return {"rss_per_journal_kib": (rss_idle - rss_before) / count, "rss_mib": rss_after / 1024,
                "fds_idle": fds_idle, "fds_after_appends": fds_after, "append_p50_ms": p50_ms,
                "apply_s": apply_s, "restart_s": restart_s}
    finally:
        broker.kill()


def _append_each(url: str, names: list[str]) -> None:
    body = b'{"n": 1, "pad": "' + b"x" * 44 + b'"}\n'
    with httpx.Client(base_url=url, timeout=60) as http, ThreadPoolExecutor(WORKERS) as pool:
        for resp in pool.map(lambda n: http.put(f"/{n}", content=body), names):
            resp.raise_for_status()


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
