"""[I-OWN-1] A data dir belongs to one broker process at a time."""

from __future__ import annotations

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
    assert "cannot listen on" in str(err.value) and "--host/--port" in str(err.value)
    assert "Traceback" not in str(err.value)
