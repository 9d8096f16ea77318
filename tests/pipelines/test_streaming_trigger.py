"""One ``--trigger`` rule for every streaming job: ``available-now`` or seconds > 0,
checked before Spark starts, refused as one ``error: …`` line naming the flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from herald.pipelines.streaming import parse_trigger, validate_trigger
from herald.protocol.errors import ValidationError

JOBS = {
    "dedupe": ["pipelines", "dedupe", "--input", "prefix=a/", "--output", "prefix=b/", "--checkpoint", "ck"],
    "word-count": ["examples", "word-count", "run", "--checkpoint", "ck"],
    "bike-share": ["examples", "bike-share", "run", "--checkpoint", "ck", "--dsn", "postgresql://nobody@127.0.0.1/x"],
}


@pytest.mark.parametrize("trigger", ["available-now", "0.5", "30.0"])
def test_available_now_and_positive_seconds_are_valid(trigger):
    validate_trigger(trigger)


@pytest.mark.parametrize("trigger", ["0", "0.0", "-1", "nan", "inf", "", "soon"])
def test_anything_else_is_refused_naming_the_field(trigger):
    with pytest.raises(ValidationError) as err:
        validate_trigger(trigger)
    assert str(err.value) == f"trigger: want available-now or seconds > 0 ({trigger!r})"


def test_a_flag_is_parsed_as_a_duration():
    assert parse_trigger("available-now") == "available-now"
    assert parse_trigger("1m30s") == "90.0"
    with pytest.raises(ValidationError, match=r"^trigger: want available-now or seconds > 0 \('0.0'\)$"):
        parse_trigger("0s")


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_refuses_a_zero_trigger_with_one_error_line(job, tmp_path):
    result = subprocess.run([sys.executable, "-m", "herald.cli.main", *JOBS[job], "--trigger", "0s"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode != 0
    assert result.stderr == "error: trigger: want available-now or seconds > 0 ('0.0')\n"
    assert not (tmp_path / "ck").exists()  # refused before anything was made
