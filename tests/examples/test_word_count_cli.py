"""``herald examples word-count`` as a user runs it: setup, publish (bad files refused
whole, with the file and byte offset), query in every output format, one-line errors."""

from __future__ import annotations

import orjson
import pytest
import yaml

from herald.client import BrokerClient, read_committed
from herald.examples.word_count.journals import ensure_journals
from herald.testing import BrokerProcess, Producer, wait_until
from tests.examples.word_count_helpers import QueryService, corpus_files, word_count, word_count_cli


@pytest.fixture(scope="module")
def broker_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("word-count-cli")
    proc = BrokerProcess(root / "data", root / "fragments").start()
    yield proc.url
    proc.kill()


def _heads(url: str) -> dict[str, int]:
    with BrokerClient(url) as client:
        return {info.name: client.write_head(info.name) for info in client.list("prefix=word-count/docs/")}


def test_setup_creates_the_journals_once(broker_url):
    first = word_count("setup", "--partitions", "2", "--broker", broker_url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("created 4 journals: word-count/docs/part-000")
    again = word_count("setup", "--partitions", "2", "--broker", broker_url)
    assert again.stdout.strip() == "created 0 journals (all exist)"
    bad = word_count("setup", "--partitions", "0", "--broker", broker_url)
    assert bad.returncode == 1 and bad.stderr == "error: partitions: want 1..256, got 0\n"


def test_publish_sends_each_file_as_one_document(broker_url, tmp_path):
    with BrokerClient(broker_url) as client:
        ensure_journals(client, 2)
    before = _heads(broker_url)
    doc = tmp_path / "city.txt"
    doc.write_text("Circumambulate the city — the café’s city.", encoding="utf-8")
    result = word_count("publish", str(doc), "--broker", broker_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("published 1 documents (")
    with BrokerClient(broker_url) as client:
        bodies = [orjson.loads(env.value) for name in _heads(broker_url)
                  for env in read_committed(client, name) if before[name] <= env.begin]
    assert [(b["doc"], b["text"]) for b in bodies] == [(str(doc), doc.read_text(encoding="utf-8"))]


def test_a_file_that_is_not_utf8_is_named_with_its_offset_and_nothing_is_published(broker_url, tmp_path):
    with BrokerClient(broker_url) as client:
        ensure_journals(client, 2)
    good, bad = tmp_path / "good.txt", tmp_path / "latin1.txt"
    good.write_text("fine words", encoding="utf-8")
    bad.write_bytes("naïve café".encode("latin-1"))
    before = _heads(broker_url)
    result = word_count_cli("publish", str(good), str(bad), "--broker", broker_url)  # As a user sees it.
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"error: {bad}: not UTF-8: byte 0xef at offset 2 (invalid continuation byte); " \
                            "nothing was published\n"
    missing = word_count("publish", str(tmp_path / "nope.txt"), "--broker", broker_url)
    assert missing.returncode == 1 and missing.stderr == f"error: {tmp_path / 'nope.txt'}: No such file or directory\n"
    assert _heads(broker_url) == before


def test_publish_without_journals_says_to_run_setup(tmp_path, broker_url):
    result = word_count("publish", corpus_files()[0], "--to", "prefix=nowhere/", "--broker", broker_url)
    assert result.returncode == 1
    assert result.stderr == "error: selector: 'prefix=nowhere/' matches no journals: run `setup` first\n"


@pytest.fixture(scope="module")
def service(broker_url):
    with BrokerClient(broker_url) as client:
        ensure_journals(client, 2)
        Producer(client).committed("word-count/counts/part-000", {"bigram": "the city", "count": 5},
                                   {"bigram": "the cat", "count": 1}, {"bigram": "then some", "count": 3})
        head = client.write_head("word-count/counts/part-000")
    svc = QueryService(broker_url).start()
    wait_until(lambda: svc.read_through()["word-count/counts/part-000"] >= head, "the service to catch up")
    yield svc
    svc.kill()


def test_query_prints_a_table_json_or_yaml(service):
    table = word_count("query", "--prefix", "the c", "--service", service.url)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines() == ["BIGRAM     COUNT", "the cat    1", "the city   5"]
    one = word_count("query", "The City", "-o", "json", "--service", service.url)
    assert orjson.loads(one.stdout) == {"bigram": "the city", "w1": "the", "w2": "city", "count": 5}
    listed = yaml.safe_load(word_count("query", "--prefix", "the", "--limit", "2", "-o", "yaml",
                                           "--service", service.url).stdout)
    assert listed["truncated"] is True and [b["bigram"] for b in listed["bigrams"]] == ["the cat", "the city"]


@pytest.mark.parametrize(("args", "error"), [
    (["query", "the"], "error: BIGRAM: want two words separated by a space, e.g. 'the city' (got 'the')"),
    (["query"], "error: BIGRAM: give either a bigram ('the city') or --prefix, not both or neither"),
    (["query", "the city", "--prefix", "the"],
     "error: BIGRAM: give either a bigram ('the city') or --prefix, not both or neither"),
    (["query", "the big!", ], "error: w2: want one word (letters, digits, inner apostrophes), got 'big!'"),
    (["query", "--prefix", "the", "--limit", "0"], "error: limit: want 1..100000, got 0"),
])
def test_bad_queries_are_one_error_line(service, args, error):
    result = word_count(*args, "--service", service.url)
    assert result.returncode == 1 and result.stderr == error + "\n", result.stderr


def test_an_unreachable_service_is_one_error_line():
    result = word_count_cli("query", "the city", "--service", "http://127.0.0.1:9")  # No traceback.
    assert result.returncode == 1
    assert result.stderr.startswith("error: service: cannot reach the word-count service at http://127.0.0.1:9")
    assert len(result.stderr.splitlines()) == 1


def test_run_refuses_bad_settings_before_starting_spark(tmp_path):
    result = word_count("run", "--checkpoint", str(tmp_path), "--on-bad-document", "ignore")
    assert result.returncode == 1 and result.stderr == "error: on_bad_document: want fail or skip, got 'ignore'\n"


def test_corpus_lists_the_shipped_documents():
    result = word_count("corpus")
    assert [line.rsplit("/", 1)[1] for line in result.stdout.splitlines()] == \
        [path.rsplit("/", 1)[1] for path in corpus_files()]


def test_a_bad_document_reaching_the_driver_is_one_line_with_its_journal_and_offset():
    from herald.examples.word_count.cli import _query_error

    spark_text = ("[STREAM_FAILED] Query terminated with exception: An exception was thrown from the Python "
                  "worker:\nTraceback (most recent call last):\n  File \"job.py\", line 112\n"
                  "herald.examples.word_count.job.BadDocumentError: offset 2932: journal word-count/docs/part-000: "
                  "not a document: want a JSON object with a string field 'text' (run with --on-bad-document "
                  "skip to drop such messages)\n\n\tat org.apache.spark…")
    assert str(_query_error(RuntimeError(spark_text))) == (
        "offset 2932: journal word-count/docs/part-000: not a document: want a JSON object with a string field "
        "'text' (run with --on-bad-document skip to drop such messages)")
    assert str(_query_error(RuntimeError("\nboom\nmore"))) == "the word-count query failed: boom"
