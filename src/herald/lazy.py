"""Package namespaces that load their names on first use (PEP 562).

A fresh Spark Python process imports `herald` and `herald.client` on the way to
the one or two classes it runs; a package ``__init__`` importing every submodule
made each such process pay for all of them (issue 15). A package instead lists
where each public name is defined and installs the two module hooks:

    _EXPORTS = {"BrokerClient": "herald.client.broker", ...}
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

``from package import Name`` and ``package.Name`` behave as before; the first
lookup imports the defining module and keeps the value in the package, so later
lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str],
                 public: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` (``exports``: public name → defining module)
    and ``__dir__`` (``public``, its ``__all__``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__
