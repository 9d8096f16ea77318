"""How ``herald`` commands print: kubectl-style tables (rich, no borders), or
``-o yaml`` / ``-o json`` for machines; progress bars only on a terminal's stderr.

Consoles are built per call on the current ``sys.stdout`` / ``sys.stderr`` so test
runners that swap them capture everything.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

__all__ = [
    "OutputFormat",
    "humanize_age",
    "humanize_bytes",
    "print_doc",
    "print_table",
    "progress",
    "table_header",
]

NON_TTY_WIDTH = 100_000


class OutputFormat(str, enum.Enum):
    table = "table"
    yaml = "yaml"
    json = "json"


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    # Off a terminal, never wrap or truncate: scripts parse these lines.
    return Console(file=stream, highlight=False, soft_wrap=not tty, width=None if tty else NON_TTY_WIDTH)


def table_header(label: str) -> str:
    """gazctl's column titles: ``app.gazette.dev/message-type`` → ``APP GAZETTE DEV/MESSAGE-TYPE``."""
    return label.replace(".", " ").replace("_", " ").upper()


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A borderless table, one row per line, columns padded (as ``kubectl get``)."""
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 3, 0, 0), header_style="bold",
                  expand=False)
    for header in headers:
        table.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console = _console()
    with console.capture() as captured:
        console.print(table)
    lines = (line.rstrip() for line in captured.get().splitlines())
    console.file.write("".join(line + "\n" for line in lines))
    console.file.flush()


def print_doc(doc: Any, fmt: OutputFormat) -> None:
    """``doc`` as YAML (block style, keys in order) or indented JSON."""
    out = sys.stdout
    if fmt is OutputFormat.yaml:
        docs = doc if isinstance(doc, list) else [doc]
        out.write(yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False) if docs else "")
    else:
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    out.flush()


def humanize_bytes(n: int) -> str:
    """``43 B``, ``2.3 KiB``, ``21 MiB`` (IEC units, as gazctl prints lengths)."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B":
        return f"{n} B"
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


_AGES = ((365 * 86400, "year"), (30 * 86400, "month"), (7 * 86400, "week"), (86400, "day"),
         (3600, "hour"), (60, "minute"), (1, "second"))


def humanize_age(seconds: float) -> str:
    """``now``, ``1 minute ago``, ``8 minutes ago``, ``2 hours ago``…"""
    if seconds < 1:
        return "now"
    for size, name in _AGES:
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {name}{'s' if count != 1 else ''} ago"
    return "now"


class _NoProgress:
    def advance(self, n: int) -> None:
        pass

    def update_total(self, total: int | None) -> None:
        pass


class _BarProgress:
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def update_total(self, total: int | None) -> None:
        self._progress.update(self._task, total=total)


@contextlib.contextmanager
def progress(description: str, total: int | None = None,
             unit: str = "bytes") -> Iterator[_BarProgress | _NoProgress]:
    """A progress bar on stderr if it is a terminal; otherwise nothing (stdout, where
    data goes, is never touched). ``unit`` is ``bytes`` or a count's noun (``events``)."""
    if not sys.stderr.isatty():
        yield _NoProgress()
        return
    columns: tuple[Any, ...]
    if unit == "bytes":
        columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                   TransferSpeedColumn())
    else:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn(unit), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=_console(stderr=True), transient=True) as bar:
        yield _BarProgress(bar, bar.add_task(description, total=total))
