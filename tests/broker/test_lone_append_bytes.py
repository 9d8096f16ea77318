"""``herald serve --lone-append-bytes``: a lone writer's small group is made durable by
one fdatasync of the commit log by default (`herald.fragment.commit_log.LONE_BYTES`),
and by its two in-place fdatasyncs (spool data and commit line) with 0. Either way
every acknowledged append reads back where its acknowledgement said [I-APPEND-3]."""

from __future__ import annotations

import re

import httpx
import pytest

from herald.testing import apply_specs, journal_spec

APPENDS = 40
JOURNAL = "lone/j"


def _fdatasyncs(url: str) -> float:
    text = httpx.get(f"{url}/debug/metrics", timeout=10).text
    found = re.search(r"^herald_broker_fdatasyncs_total ([0-9.e+]+)$", text, re.M)
    assert found, "the broker reports no fdatasync counter"
    return float(found.group(1))


def _append_one_at_a_time(url: str) -> tuple[float, list[tuple[int, bytes]]]:
    """APPENDS appends, each sent once the last was answered (one group per round);
    the fdatasyncs they cost and (begin, body) of each."""
    acked = []
    with httpx.Client(base_url=url, timeout=30) as http:
        http.put(f"/{JOURNAL}", content=b"warm\n").raise_for_status()  # the spool exists
        before = _fdatasyncs(url)
        for seq in range(APPENDS):
            body = f"lone {seq} ".encode() + b"x" * seq + b"\n"
            resp = http.put(f"/{JOURNAL}", content=body)
            assert resp.status_code == 204, resp.text
            acked.append((int(resp.headers["X-Commit-Begin"]), body))
        return _fdatasyncs(url) - before, acked


@pytest.mark.parametrize("flag", [None, "0"], ids=["default-logged", "zero-in-place"])
def test_lone_append_bytes_chooses_the_log_or_the_spool(broker_factory, flag):
    args = () if flag is None else ("--lone-append-bytes", flag)
    broker = broker_factory(None, None, *args)
    apply_specs(broker.url, journal_spec(JOURNAL))
    syncs, acked = _append_one_at_a_time(broker.url)
    if flag is None:  # one log fdatasync per round (and a few for the segment's growth, on its helper)
        assert APPENDS <= syncs < 1.5 * APPENDS
    else:  # the spool's data and its commit line, each round
        assert syncs == 2 * APPENDS
    content = httpx.get(f"{broker.url}/{JOURNAL}", timeout=30).content
    for begin, body in acked:
        assert content[begin:begin + len(body)] == body


def test_lone_append_bytes_refuses_a_negative_size(tmp_path):
    from typer.testing import CliRunner

    from herald.cli.main import app

    result = CliRunner().invoke(app, ["serve", "--data-dir", str(tmp_path), "--lone-append-bytes", "-1"])
    assert result.exit_code != 0
    assert "--lone-append-bytes" in result.output
