"""``journals edit`` keeps the user's text across errors (kubectl's loop);
``journals read --end-offset`` / ``--offsets-file`` resume where the last read ended;
progress bars go to a terminal's stderr only, never into stdout's data."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from herald.testing import journal_spec
from tests.cli.cli_helpers import herald, ok

#: An editor that edits deterministically: each run applies the next step of a
#: script (a file of Python expressions over ``text``), logging what it was shown.
EDITOR = r'''
import json, pathlib, sys
state = pathlib.Path(sys.argv[1])
doc = json.loads(state.read_text())
path = pathlib.Path(sys.argv[2])
text = path.read_text()
doc["seen"].append(text)
step = doc["steps"][len(doc["seen"]) - 1]
path.write_text(eval(step, {"text": text}))
state.write_text(json.dumps(doc))
'''


def scripted_editor(tmp_path, *steps: str) -> tuple[dict, callable]:
    (tmp_path / "editor.py").write_text(EDITOR)
    state = tmp_path / "editor.json"
    state.write_text(json.dumps({"steps": list(steps), "seen": []}))
    env = {"VISUAL": "", "EDITOR": f"{sys.executable} {tmp_path / 'editor.py'} {state}"}
    return env, lambda: json.loads(state.read_text())["seen"]


def test_edit_reopens_on_the_users_text_with_the_error_then_applies_the_fix(broker, tmp_path):
    ok(broker.url, "apply", input=yaml.safe_dump(journal_spec("edit/journal")))
    env, seen = scripted_editor(
        tmp_path,
        "text.replace('replication: 1', 'replication: 1\\n# my note\\nmax_append_rate: -5')",  # invalid
        "text.replace('max_append_rate: -5', 'max_append_rate: 1000')")                      # the fix
    out = ok(broker.url, "edit", "-l", "name=edit/journal", env=env)
    assert out.startswith("successfully applied revision=")
    first, second = seen()
    assert "error:" not in first and "max_append_rate: -5" in second and "# my note" in second  # kept
    assert "# error: " in second and "max_append_rate" in second.split("# error: ")[1].splitlines()[0]
    spec = json.loads(ok(broker.url, "list", "-o", "json"))[0]["spec"]
    assert spec["max_append_rate"] == 1000


def test_edit_saved_unchanged_after_an_error_keeps_the_text_in_a_file(broker, tmp_path):
    ok(broker.url, "apply", input=yaml.safe_dump(journal_spec("edit/journal")))
    before = ok(broker.url, "list", "-o", "yaml")
    env, seen = scripted_editor(tmp_path, "text + 'not: [valid yaml'", "text")
    result = herald(broker.url, "edit", "-l", "name=edit/journal", env=env)
    assert result.exit_code == 1 and "edit abandoned, your text is kept in " in str(result.exception)
    kept = str(result.exception).split("kept in ")[1].split(" ")[0]
    try:
        assert Path(kept).read_text().endswith("not: [valid yaml")
    finally:
        os.unlink(kept)
    assert ok(broker.url, "list", "-o", "yaml") == before and len(seen()) == 2  # nothing applied


def test_read_resumes_from_the_offsets_file_and_stops_at_end_offset(broker, tmp_path):
    ok(broker.url, "apply", input=yaml.safe_dump([journal_spec("res/a"), journal_spec("res/b")]))
    ok(broker.url, "append", "-l", "name=res/a", input="a1\na2\n")
    ok(broker.url, "append", "-l", "name=res/b", input="b1\n")
    offsets = tmp_path / "offsets.json"
    assert ok(broker.url, "read", "-l", "prefix=res/", "--offsets-file", str(offsets)) == "a1\na2\nb1\n"
    assert json.loads(offsets.read_text()) == {"res/a": 6, "res/b": 3}
    ok(broker.url, "append", "-l", "name=res/a", input="a3\n")
    assert ok(broker.url, "read", "-l", "prefix=res/", "--offsets-file", str(offsets)) == "a3\n"
    assert json.loads(offsets.read_text()) == {"res/a": 9, "res/b": 3}
    assert ok(broker.url, "read", "-l", "prefix=res/", "--offsets-file", str(offsets)) == ""
    # --end-offset: a window of each journal, and the file records where it stopped.
    window = tmp_path / "window.json"
    assert ok(broker.url, "read", "-l", "prefix=res/", "--offset", "3", "--end-offset", "6",
              "--offsets-file", str(window)) == "a2\n"
    assert json.loads(window.read_text()) == {"res/a": 6, "res/b": 3}


def test_a_hostile_offsets_file_is_refused_naming_it(broker, tmp_path):
    ok(broker.url, "apply", input=yaml.safe_dump(journal_spec("res/a")))
    for content in ("[1, 2]", '{"res/a": -4}', '{"res/a": "x"}', "{not json"):
        (tmp_path / "o.json").write_text(content)
        result = herald(broker.url, "read", "-l", "name=res/a", "--offsets-file", str(tmp_path / "o.json"))
        assert result.exit_code == 1 and str(result.exception).startswith("--offsets-file: "), content
    result = herald(broker.url, "read", "-l", "name=res/a", "--committed", "--end-offset", "5")
    assert result.exit_code == 1 and "drop --offsets-file/--end-offset" in str(result.exception)


def test_progress_goes_to_a_terminal_stderr_and_never_into_stdout(broker, tmp_path):
    ok(broker.url, "apply", input=yaml.safe_dump(journal_spec("bar/journal")))
    data = b"".join(b"%08d " % i + b"x" * 90 + b"\n" for i in range(20_000))  # ~2 MB
    ok(broker.url, "append", "-l", "name=bar/journal", input=data)
    controller, terminal = pty.openpty()
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "herald.cli.main", "journals", "read", "-l", "name=bar/journal",
                           "--broker", broker.url], stdout=subprocess.PIPE, stderr=terminal, env=env, timeout=120)
    os.close(terminal)
    reader.join(10)
    os.close(controller)
    assert done.returncode == 0 and done.stdout == data  # stdout: the journal's bytes, exactly
    assert b"read bar/journal" in seen, (seen[-300:], time.monotonic() - started)  # the bar, on the terminal
