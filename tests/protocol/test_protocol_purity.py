"""`herald.protocol` stays pure: no I/O frameworks, no clock, no environment."""

import ast
import pathlib

import herald.protocol

FORBIDDEN = {
    "aetcd", "aiohttp", "asyncio", "fsspec", "httpx", "os", "pyspark", "random", "socket",
    "subprocess", "threading", "time",
}
PACKAGE = pathlib.Path(herald.protocol.__file__).parent


def _imported_roots(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0]


def test_protocol_modules_import_nothing_impure():
    offenders = {
        f"{path.name}: {root}"
        for path in PACKAGE.glob("*.py")
        for root in _imported_roots(path)
        if root in FORBIDDEN
    }
    assert not offenders


def test_public_names_are_sorted_and_importable():
    assert herald.protocol.__all__ == sorted(herald.protocol.__all__)
    for name in herald.protocol.__all__:
        assert hasattr(herald.protocol, name)
