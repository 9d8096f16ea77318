"""A driver's hang explained (`herald.testing.diagnose`): the Python stack of each
process in its group, and the batches its checkpoint planned and committed."""

from __future__ import annotations

import subprocess
import sys

from herald.testing.diagnose import checkpoint_state, explain_group
from herald.testing.processes import kill_group

HANG = "import threading\ndef waiting_for_a_batch():\n    threading.Event().wait()\nwaiting_for_a_batch()\n"


def test_a_hung_group_shows_each_python_stack_and_the_checkpoint_batches(tmp_path):
    query = tmp_path / "ckpt" / "query"
    for name in ("offsets/0", "offsets/1", "commits/0", "herald/sink/intents/00000000000000000000.json"):
        (query / name).parent.mkdir(parents=True, exist_ok=True)
        (query / name).write_text("{}")
    proc = subprocess.Popen([sys.executable, "-c", HANG], start_new_session=True)
    try:
        # py-spy reads the stack once the interpreter runs the script: retry until it shows.
        text = ""
        for _ in range(50):
            text = explain_group(proc.pid, tmp_path)
            if "waiting_for_a_batch" in text or "not installed" in text:
                break
    finally:
        kill_group(proc)
    assert "batches planned [0, 1], committed [0], sink intents recorded [0]" in text
    assert f"py-spy dump {proc.pid}" in text
    assert "waiting_for_a_batch" in text or "(py-spy is not installed" in text, text


def test_no_checkpoint_says_so(tmp_path):
    assert checkpoint_state(tmp_path) == f"(no streaming checkpoint below {tmp_path})"
