"""httpx without its command-line client: a Spark worker imports Herald's HTTP
client, not click, rich and pygments.

``import httpx`` runs ``from ._main import main`` (the ``httpx`` console
command), which imports click, rich and pygments whenever they are installed —
and they are (typer, which ``herald``'s CLI uses, brings them). Every Spark
Python worker and per-query source runner paid that on start-up (≈ 40 ms on a
quiet machine, several times that under load; `python -X importtime`). Before
httpx is first imported, `install` puts a small ``httpx._main`` in its place
whose ``main`` imports the real one when the console command actually runs.
Nothing else in httpx uses ``_main``.
"""

from __future__ import annotations

import sys
import types

__all__ = ["install"]


def _main(*args: object, **kwargs: object) -> object:
    """``httpx.main``: the real console client, imported now."""
    sys.modules.pop("httpx._main", None)
    import httpx._main as real

    return real.main(*args, **kwargs)


def install() -> None:
    """Stand in for ``httpx._main`` unless httpx (or it) is already imported."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stub = types.ModuleType("httpx._main", "httpx's console client, imported on first use (herald.lean_httpx).")
    stub.main = _main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stub
