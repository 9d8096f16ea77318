"""``herald pipelines lag``: read-through from a query's checkpoint vs write heads."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from herald.cli.pipelines import pipelines_app
from herald.spark.lag import checkpoint_offsets
from herald.testing import Producer, make_journals
from tests.spark.spark_helpers import run_stream

pytestmark = pytest.mark.spark


def test_lag_shows_write_head_minus_read_through_per_journal(spark, broker, client, tmp_path):
    [journal] = make_journals(broker, "lag/a", labels={"app": "lag"})
    p = Producer(client)
    p.committed(journal, *[{"n": i} for i in range(10)])
    read_through = client.write_head(journal)
    ck = tmp_path / "ck"
    run_stream(spark, broker, "app=lag", ck, tmp_path / "out")
    p.committed(journal, {"n": 10})
    assert checkpoint_offsets(ck) == {journal: read_through}
    result = CliRunner().invoke(pipelines_app, ["lag", "--checkpoint", str(ck), "--broker", broker.url])
    assert result.exit_code == 0, result.output
    [line] = [ln for ln in result.output.splitlines() if ln.startswith(journal)]
    head = client.write_head(journal)
    assert line.split()[1:] == [str(read_through), str(head), str(head - read_through)]
    # The checkpoint as a job was given it: a file: URL of the directory holding the query's.
    result = CliRunner().invoke(pipelines_app, ["lag", "--checkpoint", f"file://{tmp_path}", "-o", "json",
                                                "--broker", broker.url])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"journal": journal, "read_through": read_through, "write_head": head,
                                          "lag": head - read_through}]
    result = CliRunner().invoke(pipelines_app, ["lag", "--checkpoint", str(ck), "-o", "yaml", "--broker", broker.url])
    assert [doc["lag"] for doc in yaml.safe_load_all(result.stdout)] == [head - read_through]


def test_lag_of_a_directory_that_is_no_checkpoint_fails_clearly(tmp_path):
    result = CliRunner().invoke(pipelines_app, ["lag", "--checkpoint", str(tmp_path), "--broker", "http://x"])
    assert result.exit_code == 1 and "not a Spark checkpoint" in str(result.exception)


def test_lag_of_a_directory_with_several_query_checkpoints_asks_for_one(tmp_path):
    for name in ("q1", "q2"):
        (tmp_path / name / "offsets").mkdir(parents=True)
    result = CliRunner().invoke(pipelines_app, ["lag", "--checkpoint", str(tmp_path), "--broker", "http://x"])
    assert result.exit_code == 1 and "several query checkpoints (q1, q2)" in str(result.exception)
