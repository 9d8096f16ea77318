"""``bench/results/history.csv``: one row per headline figure per run, with the commit.

SUMMARY.md is overwritten by every run; the history is only appended to, so the trend
of each headline across changes can be read (or plotted) later. Only the benchmarks a
run actually measured are recorded (``--only`` runs add just their own rows).
"""

from __future__ import annotations

import csv
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from bench.runner import Report

COLUMNS = ("utc", "commit", "quick", "benchmark", "comparison", "herald", "reference",
           "unit", "reference_system", "ratio")


def git_commit(cwd: Path) -> str:
    """The short commit of the tree being measured, ``+dirty`` if it has changes
    (outside ``bench/results``)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=False).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    # The run's own results, written as each benchmark ends, are not a change to what it measures.
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)bench/results")
    return commit + ("+dirty" if changed else "")


def history_rows(reports: Sequence[Report], commit: str, utc: str) -> list[dict[str, object]]:
    return [{"utc": utc, "commit": commit, "quick": int(r.config.quick), "benchmark": r.name,
             "comparison": h.label, "herald": h.herald.median, "reference": h.reference.median,
             "unit": h.herald.unit, "reference_system": h.reference.system, "ratio": h.ratio}
            for r in reports if not r.error for h in r.headlines]


def append_history(reports: Sequence[Report], results_dir: Path) -> Path:
    """Append this run's headline rows to ``history.csv`` (header written once)."""
    path = results_dir / "history.csv"
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = history_rows(reports, git_commit(Path(__file__).parent), utc)
    is_new = not path.exists()
    with path.open("a", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        if is_new:
            writer.writeheader()
        writer.writerows(rows)
    return path
