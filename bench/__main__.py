"""``python -m bench [--quick] [--only NAMES] [--results-dir DIR]``: run the benchmarks,
write each one's JSON, the plots and SUMMARY.md. A benchmark that fails is
recorded as failed (with its error) and the others still run."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

from bench.history import append_history
from bench.machine import machine_info
from bench.report import plot_report, write_summary
from bench.runner import Config, Report

BENCHMARKS = ("append", "cluster", "publish", "read", "scaling", "journals", "spark")


def _run_one(name: str, config: Config) -> Report:
    """Run one benchmark. `run` syncs the machine's dirty pages first: right after
    `make install` (~1 GB of venv) their write-back landed in the first benchmark's
    fdatasyncs (a fresh clone's 1 KiB x1 p99 was 62-134 ms, 0.67 ms once settled)."""
    start = time.perf_counter()
    try:
        module = importlib.import_module(f"bench.{name}")
        report = module.run(config)
    except Exception as err:  # noqa: BLE001 — the process edge: record and go on.
        traceback.print_exc()
        report = Report(name, config)
        report.error = f"{type(err).__name__}: {err}"
    report.elapsed_s = time.perf_counter() - start
    return report


def run(names: list[str], config: Config, runner=_run_one) -> list[Report]:
    """Run ``names`` in order; write JSON per benchmark, plots and SUMMARY.md."""
    start = time.perf_counter()
    machine = machine_info(config.work_dir) if names else _stored_machine(config)
    reports, plots, plot_error = [], {}, None
    config.results_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        os.sync()  # see _run_one's note: start each benchmark with no one else's dirty pages
        report = runner(name, config)
        report.write(machine)
        reports.append(report)
        print(f"bench: {name} done in {report.elapsed_s:.0f} s"
              + (f" (FAILED: {report.error})" if report.error else ""), file=sys.stderr, flush=True)
        try:
            plots[name] = plot_report(report, config.results_dir)
        except ImportError as err:
            plot_error = f"matplotlib is not installed ({err})"
    everything = _all_reports(config, reports)
    path = write_summary(everything, machine, config.results_dir, plots, time.perf_counter() - start, plot_error)
    history = append_history(reports, config.results_dir)
    print(f"bench: wrote {path} and appended to {history}", file=sys.stderr)
    return reports


def _stored_machine(config: Config) -> dict:
    """The machine of the newest stored result (for ``--summary-only``)."""
    paths = sorted(config.results_dir.glob("*.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(paths[-1].read_text()).get("machine", {}) if paths else {}


def _all_reports(config: Config, fresh: list[Report]) -> list[Report]:
    """This run's reports plus the results of benchmarks it did not run (``--only``),
    read back from their JSON, so SUMMARY.md always covers every benchmark."""
    by_name = {r.name: r for r in fresh}
    for path in sorted(config.results_dir.glob("*.json")):
        if path.stem not in by_name:
            try:
                by_name[path.stem] = Report.from_dict(json.loads(path.read_text()), config)
            except (ValueError, KeyError, TypeError) as err:
                print(f"bench: ignoring {path}: {err}", file=sys.stderr)
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    return sorted(by_name.values(), key=lambda r: (order.get(r.name, len(order)), r.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller, fewer, shorter (< 3 min)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--work-dir", type=Path, default=None, help="scratch space (default: a temp dir)")
    parser.add_argument("--summary-only", action="store_true", help="rewrite SUMMARY.md from the JSON results")
    args = parser.parse_args(argv)
    if args.summary_only:
        run([], Config(results_dir=args.results_dir))
        return 0
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    logging.basicConfig(level=logging.WARNING)
    reports = run(names, Config(quick=args.quick, results_dir=args.results_dir, work_dir=args.work_dir))
    return 1 if all(r.error for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
