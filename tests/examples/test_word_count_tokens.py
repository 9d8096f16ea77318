"""Words and bigrams (`herald.examples.word_count.tokens`), the model's prefix search,
and the job's per-document step (`document_bigrams`) — all pure, no Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.examples.word_count.job import BadDocumentError, document_bigrams
from herald.examples.word_count.model import BigramCounts
from herald.examples.word_count.tokens import bigram_key, bigrams, normalise_prefix, split_bigram, words
from herald.protocol.errors import ValidationError


def test_words_fold_case_split_on_punctuation_and_keep_inner_apostrophes():
    assert words("It was the best of times, it was THE worst -- of times!") == \
        ["it", "was", "the", "best", "of", "times", "it", "was", "the", "worst", "of", "times"]
    assert words("Don’t stop: o'clock, 'quoted' 12th_man") == ["don't", "stop", "o'clock", "quoted", "12th", "man"]


def test_words_are_unicode_and_one_normal_form():
    decomposed, composed = "cafe\u0301", "caf\u00e9"
    assert words(f"{decomposed} {composed} STRASSE Straße") == ["café", "café", "strasse", "strasse"]
    assert words("東京 タワー") == ["東京", "タワー"]


def test_bigrams_are_consecutive_pairs_within_one_document():
    assert bigrams("The city, the CITY and the sea.") == \
        ["the city", "city the", "the city", "city and", "and the", "the sea"]
    assert bigrams("alone") == [] and bigrams("") == [] and bigrams(" -- ") == []


@given(st.text())
def test_every_text_has_one_bigram_fewer_than_words_and_each_is_two_words(text):
    found, pairs = words(text), bigrams(text)
    assert len(pairs) == max(0, len(found) - 1)
    assert all(len(p.split(" ")) == 2 for p in pairs)


def test_query_words_are_normalised_and_must_be_one_word_each():
    assert bigram_key("The", "CITY") == "the city"
    assert split_bigram("  the   city ") == ("the", "city")
    for bad in ("", "big city", "the!", "a" * 101, "x\x00"):
        with pytest.raises(ValidationError) as err:
            bigram_key("the", bad)
        assert err.value.field == "w2"
    with pytest.raises(ValidationError, match="two words") as err:
        split_bigram("the")
    assert err.value.field == "bigram"


def test_prefixes_are_normalised_and_bounded():
    assert normalise_prefix("  The   City") == "the city"
    assert normalise_prefix("the ") == "the "  # The first word is exactly "the".
    with pytest.raises(ValidationError, match="control"):
        normalise_prefix("the\x00city")
    with pytest.raises(ValidationError, match="longer than"):
        normalise_prefix("x" * 202)


def test_prefix_search_is_ordered_bounded_and_sees_new_keys():
    model = BigramCounts()
    for key, count in [("the city", 3), ("the cat", 1), ("then some", 2), ("a city", 9), ("the city", 5)]:
        model.apply(key, count)
    assert model.with_prefix("the c", 10).bigrams == [("the cat", 1), ("the city", 5)]
    assert model.with_prefix("the", 10).bigrams == [("the cat", 1), ("the city", 5), ("then some", 2)]
    assert model.with_prefix("the ", 1).truncated and not model.with_prefix("the ", 2).truncated
    model.apply("the cave", 4)  # After a search: merged in at the next one.
    assert [b for b, _ in model.with_prefix("the ca", 10).bigrams] == ["the cat", "the cave"]
    assert model.count("the city") == 5 and model.count("no such") == 0 and len(model) == 5


@given(st.dictionaries(st.text("ab ", min_size=1, max_size=4), st.integers(1, 9)), st.text("ab ", max_size=3))
def test_prefix_search_equals_a_scan(entries, prefix):
    model = BigramCounts()
    for key, count in entries.items():
        model.apply(key, count)
    assert model.with_prefix(prefix, 10**6).bigrams == sorted((k, v) for k, v in entries.items() if k.startswith(prefix))


def _documents(*values: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"journal": ["docs/part-000"] * len(values),
                                       "begin": [100 * i for i in range(len(values))], "value": list(values)})


def test_the_jobs_document_step_emits_each_bigram_occurrence():
    out = list(document_bigrams(iter([_documents(b'{"doc":"a","text":"the city the city"}')]), skip_bad=False))
    assert out[0].column("bigram").to_pylist() == ["the city", "city the", "the city"]


@pytest.mark.parametrize("value", [b'{"doc":"a","text":"caf\xe9"}', b'{"doc":"a"}', b'["text"]', b'{"text": 7}'])
def test_a_bad_document_stops_the_job_naming_its_journal_and_offset(value):
    batch = _documents(b'{"text":"fine words"}', value)
    with pytest.raises(BadDocumentError, match=r"^offset 100: journal docs/part-000: not a document"):
        list(document_bigrams(iter([batch]), skip_bad=False))


def test_a_bad_document_is_skipped_and_logged_with_its_offset_when_asked(caplog):
    batch = _documents(b'{"text":"fine words"}', b'{"doc":"a","text":"caf\xe9"}', b'{"text":"more words"}')
    out = list(document_bigrams(iter([batch]), skip_bad=True))
    assert out[0].column("bigram").to_pylist() == ["fine words", "more words"]
    assert "journal=docs/part-000 offset=100" in caplog.text
