"""``herald pipelines generate`` and ``audit`` as commands (no Spark)."""

from __future__ import annotations

import orjson
import typer
from typer.testing import CliRunner

from herald.cli.pipelines import pipelines_app


def _app() -> typer.Typer:
    return pipelines_app


def test_generate_then_audit_as_json_reports_every_key_missing_from_an_empty_output(broker, journals):
    runner = CliRunner()
    gen = runner.invoke(_app(), ["generate", "--output", "prefix=events/", "--count", "500", "--dup-rate", "0.1",
                                 "--seed", "4", "--broker", broker.url])
    assert gen.exit_code == 0, gen.output
    assert "published 500 events" in gen.output
    result = runner.invoke(_app(), ["audit", "--input", "prefix=events/", "--output", "prefix=deduped/",
                                    "-o", "json", "--broker", broker.url])
    assert result.exit_code == 1  # nothing deduplicated yet: every key is missing.
    doc = orjson.loads(result.stdout)
    assert doc["unique_keys"] == 500 and doc["missing_keys"] == 500 and doc["ok"] is False
    assert doc["input_events"] == 500 + doc["input_duplicates"] > 500
