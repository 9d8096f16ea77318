"""Every CLI failure is one ``error: …`` line naming the flag or file and the fix —
run as a user runs it: the real ``herald`` process, its stderr read back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from herald.cli.main import app, run
from herald.testing import journal_spec
from tests.cli.cli_helpers import ok


def herald(*args: str, cwd=None, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "herald.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=full_env)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The process failed with exactly one ``error:`` line and no traceback."""
    assert done.returncode != 0, done
    lines = [ln for ln in done.stderr.splitlines() if " INFO " not in ln]  # serve's start-up log
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return herald("serve", "--log.level", "warning", *args, cwd=tmp_path)


def test_a_port_in_use_names_port_and_the_fix(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = one_error_line(serve(tmp_path, "--port", str(port), "--data-dir", str(tmp_path / "d")))
    assert line.startswith(f"error: --port: 127.0.0.1:{port} is already in use") and "choose another --port" in line


@pytest.mark.parametrize("host, says", [("192.0.2.77", "is not an address of this machine"),
                                        ("no-such-host.invalid", "cannot resolve")])
def test_an_unbindable_host_names_host(tmp_path, host, says):
    line = one_error_line(serve(tmp_path, "--host", host, "--port", "0", "--data-dir", str(tmp_path / "d")))
    assert line.startswith("error: --host: ") and says in line and "127.0.0.1" in line


def test_a_data_dir_that_is_a_file_names_data_dir(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    line = one_error_line(serve(tmp_path, "--port", "0", "--data-dir", str(tmp_path / "file")))
    assert line == f"error: --data-dir: {tmp_path / 'file'} is a file, not a directory; remove it or choose " \
                   "another --data-dir"


def test_a_data_dir_that_cannot_be_created_names_data_dir(tmp_path):
    (tmp_path / "file").write_text("")
    line = one_error_line(serve(tmp_path, "--port", "0", "--data-dir", str(tmp_path / "file" / "sub")))
    assert line.startswith("error: --data-dir: cannot create ") and "choose a writable --data-dir" in line


@pytest.mark.parametrize("args", [("serve", "--port", "0"), ("journals", "list")])
def test_an_unknown_log_level_is_refused_before_anything_runs(tmp_path, args):
    line = one_error_line(herald(*args, "--log.level", "verbose", cwd=tmp_path))
    assert "'--log.level'" in line and "'verbose' is not a level; use one of debug, info, warning, error" in line
    assert not (tmp_path / "herald-data").exists()  # serve did not start


def test_apply_of_a_missing_file_names_the_file(tmp_path):
    line = one_error_line(herald("journals", "apply", "-f", str(tmp_path / "specs.yaml"), "--broker", "http://x:1"))
    assert line == f"error: -f: {tmp_path / 'specs.yaml'}: no such file; give a YAML file of JournalSpecs, " \
                   "or '-' to read them from stdin"


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_an_unreachable_broker_prints_the_address_tried_and_where_it_came_from(tmp_path):
    address = f"http://127.0.0.1:{free_port()}"
    line = one_error_line(herald("journals", "list", "--broker", address))
    assert line.startswith(f"error: broker: cannot reach the broker at {address} (from --broker): Connection refused")
    assert "herald serve" in line
    (tmp_path / "herald.ini").write_text(f"[journals.Broker]\nAddress = {address}/\n")
    line = one_error_line(herald("members", "list", cwd=tmp_path, env={"BROKER_ADDRESS": ""}))
    assert f"at {address} (from {tmp_path / 'herald.ini'})" in line


@pytest.mark.parametrize("args, names", [
    (("journals", "list", "-o", "xml"), "'--output'"),
    (("journals", "read"), "'--selector'"),
    (("journals", "read", "-l", "x=y", "--end-offset", "-5"), "'--end-offset'"),
    (("journals", "list", "--no-such-flag"), "--no-such-flag"),
    (("no-such-command",), "'no-such-command'"),
])
def test_usage_errors_are_one_line_naming_the_flag(capsys, args, names):
    """In-process through `run`, the entry point's own error rendering (no subprocess
    needed: nothing is started before the arguments are parsed)."""
    with pytest.raises(SystemExit) as exit_:
        run(app, [*args, "--broker", "http://x:1"] if args[0] == "journals" else list(args))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert names in err and "--help)" in err


def test_replication_beyond_an_embedded_broker_is_refused_with_a_400_naming_the_field(broker, tmp_path):
    spec = dict(journal_spec("repl/journal"), replication=3)
    (tmp_path / "spec.yaml").write_text(__import__("yaml").safe_dump(spec))
    line = one_error_line(herald("journals", "apply", "-f", str(tmp_path / "spec.yaml"), "--broker", broker.url))
    assert line.startswith("error: changes[0].upsert.replication: repl/journal: replication 3 needs 3 brokers")
    assert "use replication: 1" in line
    with broker.client() as http:
        response = http.post("/v1/journals/apply", json={"changes": [{"upsert": spec, "expect_mod_revision": 0}]})
    assert response.status_code == 400 and response.json()["field"] == "changes[0].upsert.replication"
    assert ok(broker.url, "list").strip() == "NAME"  # nothing applied
