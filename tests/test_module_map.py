"""docs/modules.md names every module under src/herald, so a newcomer's map never drifts."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> set[str]:
    names = set()
    for path in (ROOT / "src" / "herald").rglob("*.py"):
        parts = list(path.relative_to(ROOT / "src").with_suffix("").parts)
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_is_on_the_map():
    mapped = (ROOT / "docs" / "modules.md").read_text()
    missing = sorted(m for m in _modules() if f"| `{m}` |" not in mapped)
    assert not missing, f"add these modules to docs/modules.md: {missing}"
