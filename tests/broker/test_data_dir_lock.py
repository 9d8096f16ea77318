"""[I-OWN-1] A data dir belongs to one broker process at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from herald.testing import BrokerProcess, seed_journal

NAME = "locked/journal"


def test_a_second_broker_on_the_same_data_dir_refuses_naming_the_owner(broker_factory, tmp_path):
    first = seed_journal(broker_factory(tmp_path / "data"), NAME)
    second = BrokerProcess(tmp_path / "data", tmp_path / "other-fragments")

    with pytest.raises(RuntimeError) as err:
        second.start()

    assert second.proc.wait(30) == 1
    assert f"in use by another broker (pid {first.proc.pid})" in str(err.value)
    assert "Traceback" not in str(err.value)
    with first.client() as http:  # the owner is untouched
        assert http.put(f"/{NAME}", content=b"more\n").headers["X-Commit-Begin"] == "5"
        assert http.get(f"/{NAME}").content == b"seed\nmore\n"


def test_the_lock_of_a_killed_broker_does_not_block_its_restart(broker_factory, tmp_path):
    proc = seed_journal(broker_factory(tmp_path / "data"), NAME)
    proc.kill()
    assert (tmp_path / "data" / "LOCK").exists()

    proc.start()

    with proc.client() as http:
        assert http.get(f"/{NAME}").content == b"seed\n"


def test_a_port_in_use_is_one_line_naming_the_flag(broker_factory, tmp_path):
    first = broker_factory(tmp_path / "data")
    other = BrokerProcess(tmp_path / "data2")

    with pytest.raises(RuntimeError) as err:
        other.start(port=first.port)

    assert other.proc.wait(30) == 1
    assert "--port:" in str(err.value) and "already in use" in str(err.value)
    assert "Traceback" not in str(err.value)


def test_broker_raises_its_soft_open_file_limit_to_the_hard_limit(tmp_path):
    import resource
    import subprocess
    import sys

    from herald.testing import READY_PREFIX

    def low_soft_limit():
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    proc = subprocess.Popen([sys.executable, "-m", "herald.cli.main", "serve", "--port", "0",
                             "--data-dir", str(tmp_path / "d")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=low_soft_limit)
    try:
        assert proc.stdout.readline().startswith(READY_PREFIX)
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        [line] = [ln for ln in limits.splitlines() if ln.startswith("Max open files")]
        soft, hard = line.split()[3:5]
        assert soft == hard and soft != "256"
    finally:
        proc.kill()
        proc.wait(10)
