"""docs/python.md runs: its ``python`` blocks, in order, in one namespace, against a
real broker (the page's ``http://localhost:8080`` becomes the test broker's URL)."""

from __future__ import annotations

import re
from pathlib import Path

import herald

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_python_quickstart_runs_against_a_real_broker(broker):
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 4
    namespace: dict = {}
    for number, block in enumerate(blocks, 1):
        code = compile(block.replace("http://localhost:8080", broker.url), f"{DOC.name} block {number}", "exec")
        exec(code, namespace)  # noqa: S102 — the documentation's own code, run as a user would
    assert len(namespace["seen"]) == 10


def test_every_public_name_is_importable_from_herald():
    for name in herald.__all__:
        assert getattr(herald, name) is not None, name
    assert "read_committed" in dir(herald) and "Change" in herald.__all__
