"""SUMMARY.md (the headline table, then every figure) and PNG plots (matplotlib).

Plots are one grouped bar chart per benchmark and metric: cases along x, one bar
per system, whiskers from the slowest to the fastest run. Without matplotlib the
summary says so and is written all the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.runner import Figure, Report

__all__ = ["fmt", "plot_report", "write_summary"]

SKIP_PLOT_METRICS = frozenset({"errors", "p50_ms"})


def fmt(value: float) -> str:
    """A figure at a readable precision: 3 significant digits, thousands separated."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(fig: Figure) -> str:
    spread = "" if math.isnan(fig.spread_pct) else f" ±{fig.spread_pct / 2:.0f}%"
    return f"{fmt(fig.median)} {fig.unit}{spread}"


def headline_table(reports: Sequence[Report]) -> list[str]:
    lines = ["| benchmark | comparison | Herald | reference | ratio |", "|---|---|---|---|---|"]
    for report in reports:
        for h in report.headlines:
            ref = f"{_cell(h.reference)} ({h.reference.system})"
            lines.append(f"| {report.name} | {h.label} | {_cell(h.herald)} | {ref} | {h.ratio:.2f} |")
    return lines


def _figures_table(report: Report) -> list[str]:
    lines = ["| system | case | metric | median | min | max | spread |", "|---|---|---|---|---|---|---|"]
    for f in report.figures:
        lines.append(f"| {f.system} | {f.case} | {f.metric} | {fmt(f.median)} {f.unit} | "
                     f"{fmt(min(f.values, default=float('nan')))} | {fmt(max(f.values, default=float('nan')))} | "
                     f"{fmt(f.spread_pct)} % |")
    return lines


def write_summary(reports: Sequence[Report], machine: Mapping[str, Any], results_dir: Path,
                  plots: Mapping[str, list[Path]], total_s: float, plot_error: str | None = None) -> Path:
    quick = any(r.config.quick for r in reports)
    runs = reports[0].config.runs if reports else 0
    out = ["# Herald benchmarks", "",
           (f"Mode: {'quick' if quick else 'full'} — {runs} runs per figure (median shown, ± half the "
            f"max−min spread); the last invocation took {total_s:.0f} s (each benchmark's time is in its "
            f"section)."),
           (f"Machine: {machine.get('cpus')} CPUs ({machine.get('cpu_model')}), {machine.get('mem_gib')} GiB, "
            f"kernel {machine.get('kernel')}, Python {machine.get('python')}, disk {machine.get('disk')}; "
            f"1-minute load average {machine.get('load_avg_1m')} when the run began "
            f"(other work on the machine skews every figure)."),
           f"Peers: {', '.join(f'{k} {v}' for k, v in machine.get('versions', {}).items() if v)}.", "",
           "Ratio = Herald ÷ reference (for throughput > 1 is better for Herald; for latency < 1 is).",
           "Figures are from one machine in one run; compare only within this file.", "",
           "## Headlines", ""]
    out += headline_table(reports)
    if plot_error:
        out += ["", f"(No plots: {plot_error})"]
    for report in reports:
        out += ["", f"## {report.name}", "", f"Took {report.elapsed_s:.0f} s. Inputs: `{report.inputs}`", ""]
        if report.error:
            out += [f"**Failed:** `{report.error}`", ""]
        out += [f"- {note}" for note in report.notes]
        if report.notes:
            out.append("")
        pngs = plots.get(report.name) or sorted(results_dir.glob(f"{report.name}-*.png"))
        out += [f"![{p.stem}]({p.name})" for p in pngs]
        if pngs:
            out.append("")
        out += _figures_table(report)
    path = results_dir / "SUMMARY.md"
    path.write_text("\n".join(out) + "\n")
    return path


def plot_report(report: Report, results_dir: Path) -> list[Path]:
    """One PNG per metric with at least two bars to compare. Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    metrics = list(dict.fromkeys(f.metric for f in report.figures if f.metric not in SKIP_PLOT_METRICS))
    for metric in metrics:
        figs = [f for f in report.figures if f.metric == metric and f.values]
        cases = list(dict.fromkeys(f.case for f in figs))
        systems = list(dict.fromkeys(f.system for f in figs))
        if len(figs) < 2:
            continue
        fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cases) + 2), 4.2))
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            xs, ys, lo, hi = [], [], [], []
            for j, case in enumerate(cases):
                f = report.figure(system, case, metric)
                if f is None:
                    continue
                xs.append(j + (i - (len(systems) - 1) / 2) * width)
                ys.append(f.median)
                lo.append(f.median - min(f.values))
                hi.append(max(f.values) - f.median)
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=system)
        positive = [f.median for f in figs if f.median > 0]
        if positive and max(positive) / min(positive) > 50:
            ax.set_yscale("log")
        ax.set_xticks(range(len(cases)), cases, rotation=15 if len(cases) > 4 else 0, fontsize=8)
        ax.set_ylabel(f"{metric} ({figs[0].unit})")
        ax.set_title(f"{report.name}: {metric}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = results_dir / f"{report.name}-{metric}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
