"""Process-wide logging set-up for every ``herald`` command: ``--log.level``, ``--log.format``."""

from __future__ import annotations

import logging
import sys

from herald.cli.log_formats import JsonFormatter, TextFormatter


def configure(level: str = "warning", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
