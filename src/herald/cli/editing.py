"""``herald journals edit``'s loop, as ``kubectl edit`` does it: the user's text is never lost.

The specs open in ``$VISUAL`` / ``$EDITOR``; what is saved is applied. If the apply
fails (bad YAML, a spec that does not validate, a revision that moved on), the
editor reopens on the user's own text with the error in a comment block at the top;
saving it unchanged gives up, keeping the text in a file whose path is printed.
Saving the original unchanged cancels the edit.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from herald.cli import config
from herald.protocol.errors import HeraldError, Status

__all__ = ["EditAbandonedError", "edit_until_applied", "with_error_header", "without_header"]

HEADER = ("# Please edit the journal specs below; what you save is applied. An unchanged\n"
          "# file cancels the edit. Lines beginning with '#' are ignored.\n")


class EditAbandonedError(HeraldError):
    """The user saved again without fixing the error: their text is kept at ``path``."""

    def __init__(self, error: HeraldError, path: Path) -> None:
        super().__init__(Status.INVALID_ARGUMENT, f"{error}; edit abandoned, your text is kept in {path} "
                         f"(fix it, then `herald journals apply -f {path}`)", error.field)


def with_error_header(text: str, error: HeraldError | None) -> str:
    """``text`` under kubectl's comment block, naming ``error`` if there is one."""
    if error is None:
        return HEADER + "#\n" + text
    lines = "".join(f"# {line}\n" for line in f"error: {error}".splitlines())
    return HEADER + "#\n" + lines + "#\n" + text


def without_header(text: str) -> str:
    """``text`` without the leading comment block (the user's specs alone)."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].lstrip().startswith("#"):
        start += 1
    return "".join(lines[start:])


def _run_editor(text: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="herald-edit-", delete=False) as f:
        f.write(text)
    path = Path(f.name)
    try:
        subprocess.run([*config.editor_command(), str(path)], check=True)
        return path.read_text()
    except (OSError, subprocess.CalledProcessError) as err:
        raise HeraldError(Status.INTERNAL, f"editor failed: {err}; set $EDITOR (or $VISUAL) to an "
                                           "editor that exits 0", "EDITOR") from None
    finally:
        path.unlink(missing_ok=True)


def _keep(text: str) -> Path:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="herald-edit-", delete=False) as f:
        f.write(text)
    return Path(f.name)


def edit_until_applied(original: str, apply: Callable[[str], int]) -> int | None:
    """Edit ``original`` until ``apply`` (specs text → revision) succeeds; the
    revision applied, or None if the user saved the original unchanged. Raises
    `EditAbandonedError` when a failed text is saved again unchanged."""
    text, error = original, None
    while True:
        edited = without_header(_run_editor(with_error_header(text, error)))
        if edited == original:
            return None
        if error is not None and edited == text:
            raise EditAbandonedError(error, _keep(edited))
        try:
            return apply(edited)
        except HeraldError as err:
            text, error = edited, err
