"""The benchmark machinery on a trivial benchmark: repeated runs give medians and
spreads, headlines compare a Herald figure with its reference, and a run writes
each benchmark's JSON and SUMMARY.md. Timings are never asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

try:
    import bench  # noqa: F401
except ImportError:  # pytest not started from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.__main__ import run
from bench.loadgen import parse_wrk
from bench.runner import Config, Report, measure, measure_interleaved


def _trivial(name: str, config: Config) -> Report:
    """A benchmark whose 'measurements' are counters, so every figure is known."""
    report = Report(name, config, inputs={"trivial": True})
    calls = iter(range(100))
    herald = measure(config, lambda: {"ops_per_s": 10.0 * (1 + next(calls))})
    report.add("herald", "case", herald, {"ops_per_s": "ops/s"})
    report.add("reference", "case", {"ops_per_s": [5.0] * config.runs}, {"ops_per_s": "ops/s"})
    report.headline("trivial ops/s", ("herald", "case", "ops_per_s"), ("reference", "case", "ops_per_s"))
    return report


def test_quick_run_writes_json_with_medians_spreads_and_ratio(tmp_path):
    config = Config(quick=True, results_dir=tmp_path)

    [report] = run(["trivial"], config, runner=_trivial)

    doc = json.loads((tmp_path / "trivial.json").read_text())
    herald = next(f for f in doc["figures"] if f["system"] == "herald")
    assert herald["runs"] == [10.0, 20.0]          # quick mode repeats twice
    assert herald["median"] == 15.0
    assert herald["spread_pct"] == pytest.approx(100 * 10.0 / 15.0)
    assert doc["headlines"][0]["ratio"] == 3.0      # 15 / 5
    assert doc["machine"]["cpus"] >= 1 and doc["quick"] is True
    assert report.headlines[0].ratio == 3.0


def test_summary_has_the_headline_table(tmp_path):
    run(["trivial"], Config(quick=True, results_dir=tmp_path), runner=_trivial)

    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "| benchmark | comparison | Herald | reference | ratio |" in summary
    assert "| trivial | trivial ops/s | 15.0 ops/s ±33% | 5 ops/s ±0% (reference) | 3.00 |" in summary


def test_a_failing_benchmark_is_recorded_and_the_rest_still_run(tmp_path):
    def runner(name: str, config: Config) -> Report:
        if name == "broken":
            report = Report(name, config)
            report.error = "RuntimeError: boom"
            return report
        return _trivial(name, config)

    reports = run(["broken", "trivial"], Config(quick=True, results_dir=tmp_path), runner=runner)

    assert [r.name for r in reports] == ["broken", "trivial"]
    assert json.loads((tmp_path / "broken.json").read_text())["error"] == "RuntimeError: boom"
    assert "**Failed:** `RuntimeError: boom`" in (tmp_path / "SUMMARY.md").read_text()


def test_interleaved_runs_take_turns_starting_with_a_different_system():
    order: list[str] = []
    systems = {name: (lambda name=name: order.append(name) or {"x": 1.0}) for name in ("a", "b", "c")}

    samples = measure_interleaved(Config(), systems)

    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert samples["a"] == {"x": [1.0, 1.0, 1.0]}


def test_wrk_output_parses_to_rate_and_percentiles():
    out = """Running 1s test @ http://127.0.0.1:1
  2 threads and 32 connections
  Latency Distribution
     50%  526.00us
     75%    1.04ms
     90%    1.68ms
     99%    3.87ms
  1313 requests in 1.00s, 250.03KB read
  Non-2xx or 3xx responses: 3
Requests/sec:   1313.00
"""
    result = parse_wrk(out)

    assert (result.requests, result.errors, result.elapsed_s) == (1313, 3, 1.0)
    assert (result.p50_ms, result.p99_ms) == (0.526, 3.87)


def test_summary_keeps_benchmarks_this_run_skipped(tmp_path):
    config = Config(quick=True, results_dir=tmp_path)
    run(["older"], config, runner=_trivial)

    run(["trivial"], config, runner=_trivial)

    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "| older | trivial ops/s |" in summary and "| trivial | trivial ops/s |" in summary


def test_each_run_appends_its_headlines_to_history_csv(tmp_path):
    import csv

    config = Config(quick=True, results_dir=tmp_path)
    run(["trivial"], config, runner=_trivial)
    run(["trivial"], config, runner=_trivial)

    rows = list(csv.DictReader((tmp_path / "history.csv").open()))
    assert len(rows) == 2                                   # one headline per run, header once
    assert {r["comparison"] for r in rows} == {"trivial ops/s"}
    assert float(rows[0]["ratio"]) == 3.0 and rows[0]["quick"] == "1"
    assert rows[0]["commit"] and rows[0]["commit"] != "unknown"


def test_the_append_benchmarks_cpu_reading_counts_a_process_cpu_time():
    """`bench.append._cpu_s` (the broker's CPU per MiB of the 1 MiB cases) reads a
    process's user + system CPU: it grows as the process works."""
    import os

    from bench.append import _cpu_s

    before = _cpu_s(os.getpid())
    total = 0
    while _cpu_s(os.getpid()) == before:  # ticks of 10 ms: work until the next one
        total += sum(range(10_000))
    assert _cpu_s(os.getpid()) > before > 0 and total > 0
