"""Options of format ``herald`` as Kafka users expect them: misspelt or Kafka-named
options are errors naming Herald's, offsets and broker lists validated at the edge
(pure: no Spark session)."""

from __future__ import annotations

import pytest

from herald.protocol.errors import ValidationError
from herald.spark.offsets import DataLossError, clip_pieces, held_range, journal_range
from herald.spark.options import HeraldOptions
from herald.spark.reading import Piece

BROKER = {"broker": "http://localhost:8080"}


def refused(options: dict, streaming: bool = False) -> str:
    with pytest.raises(ValidationError) as err:
        HeraldOptions.parse(options, streaming=streaming)
    return str(err.value)


@pytest.mark.parametrize("given, nearest", [("startingOffset", "startingOffsets"),
                                            ("maxBytesPerTriger", "maxBytesPerTrigger"),
                                            ("SELECTR", "selector"), ("failondatalos", "failOnDataLoss")])
def test_a_misspelt_option_names_the_nearest_one(given, nearest):
    assert refused({**BROKER, given: "x"}) == f"{given}: unknown option of format herald; did you mean {nearest!r}?"


@pytest.mark.parametrize("given, ours", [("subscribe", "selector"), ("kafka.bootstrap.servers", "broker"),
                                         ("maxOffsetsPerTrigger", "maxBytesPerTrigger")])
def test_kafka_option_names_point_to_herald_ones(given, ours):
    assert refused({**BROKER, given: "x"}).startswith(f"{given}: is Kafka's option; Herald's is {ours!r}")


def test_an_option_far_from_any_lists_them_all():
    assert "options are appendBytes, authToken, broker" in refused({**BROKER, "zzzzzz": "1"})


def test_options_match_case_insensitively_as_spark_passes_them():
    opts = HeraldOptions.parse({"BROKER": "http://a:1", "startingoffsets": "latest", "FailOnDataLoss": "false",
                                "minpartitions": "4", "path": "ignored"}, streaming=False)
    assert (opts.brokers, opts.starting, opts.fail_on_data_loss, opts.min_partitions) == (
        ("http://a:1",), "latest", False, 4)


@pytest.mark.parametrize("value, says", [("", "required"), ("localhost:8080", "want http(s)://host:port"),
                                         ("http://a:1,ftp://b", "'ftp://b'"), (",", "required")])
def test_hostile_broker_lists_are_refused(value, says):
    assert says in refused({"broker": value})


def test_a_broker_list_is_kept_in_order():
    opts = HeraldOptions.parse({"broker": " http://a:1/ , https://b:2 "}, streaming=False)
    assert opts.brokers == ("http://a:1", "https://b:2") and opts.broker == "http://a:1"


@pytest.mark.parametrize("name, value", [("startingOffsets", "[1]"), ("startingOffsets", '{"j": -3}'),
                                         ("startingOffsets", '{"j": 1.5}'), ("endingOffsets", "earliest"),
                                         ("endingOffsets", "{nope"), ("minPartitions", "-1"),
                                         ("failOnDataLoss", "maybe")])
def test_hostile_offsets_and_limits_name_the_option(name, value):
    assert refused({**BROKER, name: value}).startswith(f"{name}: ")


def test_ending_offsets_are_for_batch_reads_only():
    assert "is for batch reads" in refused({**BROKER, "endingOffsets": "latest"}, streaming=True)


def test_a_missing_state_location_says_why_spark_cannot_give_it():
    opts = HeraldOptions.parse(BROKER, streaming=True)
    with pytest.raises(ValidationError) as err:
        opts.require_state("a streaming read")
    assert "Spark does not pass a Python data source its query's checkpoint directory" in str(err.value)
    assert HeraldOptions.parse({**BROKER, "checkpointLocation": "file:///ck"}, streaming=True).state_location == "/ck"


def test_journal_range_resolves_earliest_latest_and_json():
    assert journal_range("earliest", "latest", "j", 100, 500) == (100, 500)
    assert journal_range("latest", "latest", "j", 100, 500) == (500, 500)
    assert journal_range({"j": 200}, {"j": 300}, "j", 100, 500) == (200, 300)
    assert journal_range({"other": 200}, {"j": 9999}, "j", 100, 500) == (100, 500)
    assert journal_range({"j": -1}, {"j": -1}, "j", 0, 50) == (50, 50)
    assert journal_range({"j": 400}, {"j": 300}, "j", 0, 500) == (400, 400)  # an empty range, not an error


def test_a_start_below_the_first_byte_held_is_data_loss_unless_allowed():
    with pytest.raises(DataLossError) as err:
        held_range("j", 50, 500, 100, fail=True)
    assert "j: bytes [50, 100) no longer exist" in str(err.value) and "failOnDataLoss=false" in str(err.value)
    assert held_range("j", 50, 500, 100, fail=False) == (100, 500)
    assert held_range("j", 0, 500, 100, fail=True) == (100, 500)  # 0 is earliest: never a loss


def test_clip_pieces_keeps_only_the_range():
    pieces = [Piece("j", 0, 100), Piece("j", 100, 250), Piece("j", 250, 300)]
    assert clip_pieces(pieces, 120, 260) == [Piece("j", 120, 250), Piece("j", 250, 260)]


def test_options_spark_itself_passes_are_accepted():
    """Spark hands a stream writer its ``queryName`` and a reader its ``load(path)``
    (lower-cased, as a named query's sink sees them)."""
    opts = HeraldOptions.parse({**BROKER, "queryname": "herald-dedupe", "path": "x",
                                "checkpointLocation": "/tmp/ck"}, streaming=True)
    assert opts.state_location
