"""The shared runner: repeated runs, medians and spreads, one JSON file per benchmark.

A benchmark is a function ``run(config) -> Report``. It measures each system with
`measure` (``config.runs`` repetitions of a function returning ``{metric: value}``),
records the samples as `Figure`s, and names its headline comparisons (a Herald
figure against its reference, measured in the same run). `Report.write` stores
``results/<name>.json``; `bench.report` turns all reports into SUMMARY.md.

    report = Report("disk", config, inputs={"size_bytes": 1024})
    samples = measure(config, lambda: {"ops_per_s": loop_once()})
    fig = report.add("python", "1 KiB", samples, units={"ops_per_s": "ops/s"})
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Config", "Figure", "Headline", "Report", "measure", "measure_interleaved"]

LOWER_IS_BETTER_UNITS = frozenset({"ms", "s", "µs"})


@dataclass(frozen=True, slots=True)
class Config:
    """How a whole bench run goes: quick (smaller, fewer, shorter) or full."""

    quick: bool = False
    results_dir: Path = Path("bench/results")
    work_dir: Path | None = None  # scratch space; default: a temp dir per benchmark

    @property
    def runs(self) -> int:
        """Repetitions of every measurement (a spread needs at least two)."""
        return 2 if self.quick else 3

    @property
    def duration_s(self) -> float:
        """How long one timed load-generator run lasts."""
        return 1.0 if self.quick else 3.0

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def scratch(self, name: str) -> Path:
        """A fresh scratch directory (on the disk being measured); the caller removes it."""
        base = self.work_dir
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"herald-bench-{name}-", dir=base))


@dataclass(slots=True)
class Figure:
    """One measured quantity of one system in one case, over repeated runs."""

    system: str
    case: str
    metric: str
    unit: str
    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def spread_pct(self) -> float:
        """(max − min) / median, in percent: how much the runs disagreed."""
        med = self.median
        if not self.values or not med:
            return float("nan")
        return 100.0 * (max(self.values) - min(self.values)) / abs(med)

    @property
    def higher_is_better(self) -> bool:
        return self.unit not in LOWER_IS_BETTER_UNITS

    def key(self) -> tuple[str, str, str]:
        return self.system, self.case, self.metric

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "case": self.case, "metric": self.metric, "unit": self.unit,
                "median": self.median, "min": min(self.values, default=None),
                "max": max(self.values, default=None), "spread_pct": self.spread_pct,
                "runs": list(self.values)}


@dataclass(frozen=True, slots=True)
class Headline:
    """A Herald figure beside its reference figure from the same run."""

    label: str
    herald: Figure
    reference: Figure

    @property
    def ratio(self) -> float:
        """Herald ÷ reference, so > 1 means Herald did more (or, for times, took longer)."""
        ref = self.reference.median
        return self.herald.median / ref if ref else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "herald": self.herald.to_dict(),
                "reference": self.reference.to_dict(), "ratio": self.ratio}


@dataclass
class Report:
    """What one benchmark measured: inputs, figures, headlines, notes."""

    name: str
    config: Config
    inputs: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    elapsed_s: float = 0.0

    def add(self, system: str, case: str, samples: Mapping[str, list[float]],
            units: Mapping[str, str]) -> dict[str, Figure]:
        """Record every metric of ``samples`` (from `measure`) as a Figure."""
        out = {}
        for metric, values in samples.items():
            fig = Figure(system, case, metric, units.get(metric, ""), [float(v) for v in values])
            self.figures.append(fig)
            out[metric] = fig
        return out

    def figure(self, system: str, case: str, metric: str) -> Figure | None:
        for fig in self.figures:
            if fig.key() == (system, case, metric):
                return fig
        return None

    def headline(self, label: str, herald: tuple[str, str, str], reference: tuple[str, str, str]) -> None:
        """Name a comparison by figure keys; silently skipped if either is missing."""
        h, r = self.figure(*herald), self.figure(*reference)
        if h is not None and r is not None:
            self.headlines.append(Headline(label, h, r))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def to_dict(self, machine: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": self.name, "quick": self.config.quick, "runs": self.config.runs,
                "duration_s": self.config.duration_s, "inputs": self.inputs, "machine": dict(machine),
                "elapsed_s": round(self.elapsed_s, 2), "error": self.error,
                "figures": [f.to_dict() for f in self.figures],
                "headlines": [h.to_dict() for h in self.headlines], "notes": self.notes}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], config: Config) -> Report:
        """A report as `to_dict` stored it (to summarise earlier runs' JSON)."""
        def fig(d: Mapping[str, Any]) -> Figure:
            return Figure(d["system"], d["case"], d["metric"], d["unit"], [float(v) for v in d["runs"]])

        report = cls(doc["name"], Config(quick=doc.get("quick", False), results_dir=config.results_dir),
                     inputs=dict(doc.get("inputs") or {}), notes=list(doc.get("notes") or []),
                     error=doc.get("error"), elapsed_s=float(doc.get("elapsed_s") or 0.0))
        report.figures = [fig(d) for d in doc.get("figures") or []]
        report.headlines = [Headline(h["label"], fig(h["herald"]), fig(h["reference"]))
                            for h in doc.get("headlines") or []]
        return report

    def write(self, machine: Mapping[str, Any]) -> Path:
        self.config.results_dir.mkdir(parents=True, exist_ok=True)
        path = self.config.results_dir / f"{self.name}.json"
        path.write_text(json.dumps(self.to_dict(machine), indent=2, default=str) + "\n")
        return path


def measure(config: Config, once: Callable[[], Mapping[str, float]],
            between: Callable[[], None] | None = None, runs: int | None = None) -> dict[str, list[float]]:
    """Call ``once`` ``runs`` times (default ``config.runs``); gather each metric's
    values in run order. ``between`` runs after every run but the last (e.g. to
    reset state), outside the measurement."""
    samples: dict[str, list[float]] = {}
    n = runs or config.runs
    for i in range(n):
        for metric, value in once().items():
            samples.setdefault(metric, []).append(value)
        if between is not None and i < n - 1:
            between()
    return samples


def measure_interleaved(config: Config, systems: Mapping[str, Callable[[], Mapping[str, float]]],
                        runs: int | None = None) -> dict[str, dict[str, list[float]]]:
    """Like `measure` for several systems at once, taking turns run by run (each run
    starting from a different system), so a noisy minute on a shared machine hits
    every system alike instead of whichever happened to run then."""
    names = list(systems)
    out: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for i in range(runs or config.runs):
        for name in names[i % len(names):] + names[:i % len(names)]:
            for metric, value in systems[name]().items():
                out[name].setdefault(metric, []).append(value)
    return out


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)`` by the monotonic clock."""
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
