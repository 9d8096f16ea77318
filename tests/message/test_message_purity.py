"""The message package is pure (STYLE.md): no I/O libraries, no clock or env reads."""

import ast
import doctest
import pathlib

import herald.message

SRC = pathlib.Path(herald.message.__file__).parent
FORBIDDEN_MODULES = {"asyncio", "aiohttp", "httpx", "fsspec", "pyspark", "os", "time", "datetime", "socket", "secrets"}


def test_message_modules_import_nothing_impure():
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {name}"


def test_all_is_sorted_and_complete():
    assert herald.message.__all__ == sorted(herald.message.__all__)
    for name in herald.message.__all__:
        assert hasattr(herald.message, name)


def test_package_docstring_example_runs():
    assert doctest.testmod(herald.message).failed == 0
