"""Fragment names and JSON: Gazette's naming (gazette-facts §4.2) round-trips exactly."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herald.protocol.errors import ValidationError
from herald.protocol.fragment import EMPTY_SUM, MAX_OFFSET, Fragment, parse_content_path
from herald.protocol.journal import CompressionCodec

JOURNAL = "a/journal"
GAZETTE_SUM = "0102030405060708090a0b0c0d0e0f1011121314"
VALID_CODECS = [c for c in CompressionCodec if c is not CompressionCodec.INVALID]


@st.composite
def fragments(draw: st.DrawFn) -> Fragment:
    begin = draw(st.integers(0, MAX_OFFSET))
    end = draw(st.integers(begin, MAX_OFFSET))
    return Fragment(
        journal=JOURNAL,
        begin=begin,
        end=end,
        sum=draw(st.binary(min_size=20, max_size=20)).hex(),
        codec=draw(st.sampled_from(VALID_CODECS)),
        path_postfix=draw(st.sampled_from(["", "p", "x=1/y=2"])),
    )


def test_gazette_example_name_parses_to_its_fields() -> None:
    name = f"00000000499602d2-7fffffffffffffff-{GAZETTE_SUM}.gz"
    fragment = parse_content_path(JOURNAL, name)
    assert fragment == Fragment(JOURNAL, 1234567890, MAX_OFFSET, GAZETTE_SUM, CompressionCodec.GZIP)
    assert fragment.content_name == name
    assert fragment.content_path == f"{JOURNAL}/{name}"


@pytest.mark.parametrize(
    ("codec", "ext"),
    [
        (CompressionCodec.NONE, ".raw"),
        (CompressionCodec.GZIP, ".gz"),
        (CompressionCodec.ZSTANDARD, ".zst"),
        (CompressionCodec.SNAPPY, ".sz"),
        (CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION, ""),
    ],
)
def test_content_name_extension_follows_codec(codec: CompressionCodec, ext: str) -> None:
    fragment = Fragment(JOURNAL, 0, 16, GAZETTE_SUM, codec)
    assert fragment.content_name == f"{0:016x}-{16:016x}-{GAZETTE_SUM}{ext}"


@given(fragments())
def test_content_path_round_trips(fragment: Fragment) -> None:
    relative = fragment.content_path[len(JOURNAL) + 1:]
    assert parse_content_path(JOURNAL, relative) == fragment


@given(fragments(), st.sampled_from(["", "local", "s3://bucket/p/"]), st.sampled_from([0, 1.5, 1_700_000_000]))
def test_dict_round_trips(fragment: Fragment, store: str, mod_time: float) -> None:
    fragment = Fragment(fragment.journal, fragment.begin, fragment.end, fragment.sum, fragment.codec,
                        store, mod_time, fragment.path_postfix)
    assert Fragment.from_dict(fragment.to_dict()) == fragment


@pytest.mark.parametrize(
    ("ext", "codec"),
    [
        (".RAW", CompressionCodec.NONE),
        (".gzip", CompressionCodec.GZIP),
        (".GZ", CompressionCodec.GZIP),
        (".zstandard", CompressionCodec.ZSTANDARD),
        (".snappy", CompressionCodec.SNAPPY),
        (".SZ", CompressionCodec.SNAPPY),
        (".gzod", CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION),
        ("", CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION),
    ],
)
def test_parse_accepts_gazettes_extension_aliases_in_any_case(ext: str, codec: CompressionCodec) -> None:
    fragment = parse_content_path(JOURNAL, f"{1:016x}-{2:016x}-{GAZETTE_SUM.upper()}{ext}")
    assert (fragment.codec, fragment.sum) == (codec, GAZETTE_SUM)


@pytest.mark.parametrize(
    "name",
    [
        f"0000000000000001-0000000000000002-{GAZETTE_SUM}.bz2",  # unknown extension
        f"0000000000000001-0000000000000002-{GAZETTE_SUM[:-2]}.gz",  # short sum
        f"0000000000000001-0000000000000002-{GAZETTE_SUM}00.gz",  # long sum
        f"0000000000000001-0000000000000002-{'zz' * 20}.gz",  # sum not hex
        f"000000000000000g-0000000000000002-{GAZETTE_SUM}.gz",  # begin not hex
        f"0000000000000002-0000000000000001-{GAZETTE_SUM}.gz",  # begin > end
        f"0000000000000001-8000000000000000-{GAZETTE_SUM}.gz",  # end > int64
        f"00000000000000001-0000000000000002-{GAZETTE_SUM}.gz",  # 17 hex digits
        "0000000000000001-0000000000000002.gz",  # two fields
        f"0000000000000001-0000000000000002-{GAZETTE_SUM}-x.gz",  # four fields
        "README.md",
        f"../0000000000000001-0000000000000002-{GAZETTE_SUM}.gz",  # escaping postfix
        f"./0000000000000001-0000000000000002-{GAZETTE_SUM}.gz",
    ],
)
def test_parse_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_content_path(JOURNAL, name)
    assert err.value.field.startswith("fragment")


def test_parse_rejects_invalid_journal_name() -> None:
    with pytest.raises(ValidationError) as err:
        parse_content_path("../x", f"{1:016x}-{2:016x}-{GAZETTE_SUM}.gz")
    assert err.value.field == "fragment.journal"


def test_from_dict_names_the_bad_field() -> None:
    good = Fragment(JOURNAL, 1, 2, GAZETTE_SUM, CompressionCodec.GZIP).to_dict()
    for key, value, field in [
        ("begin", "1", "fragment.begin"),
        ("begin", 3, "fragment.begin"),
        ("compression_codec", "LZ4", "fragment.compression_codec"),
        ("compression_codec", "INVALID", "fragment.compression_codec"),
        ("sum", "00", "fragment.sum"),
        ("mod_time", -1, "fragment.mod_time"),
        ("extra", 1, "fragment.extra"),
    ]:
        with pytest.raises(ValidationError) as err:
            Fragment.from_dict({**good, key: value})
        assert err.value.field == field, key
    with pytest.raises(ValidationError) as err:
        Fragment.from_dict({k: v for k, v in good.items() if k != "end"})
    assert err.value.field == "fragment.end"


def test_size_and_is_persisted_describe_the_fragment() -> None:
    local = Fragment(JOURNAL, 10, 25, GAZETTE_SUM, CompressionCodec.NONE)
    assert local.size == 15 and not local.is_persisted
    assert Fragment(JOURNAL, 10, 25, GAZETTE_SUM, CompressionCodec.NONE, store="file:///").is_persisted


def test_empty_fragment_uses_the_all_zero_sum() -> None:
    fragment = Fragment(JOURNAL, 7, 7, EMPTY_SUM, CompressionCodec.NONE)
    assert fragment.content_name.endswith("-" + "0" * 40 + ".raw")
    fragment.validate()


def test_fragment_pickles_for_spark_executors() -> None:
    fragment = Fragment(JOURNAL, 1, 2, GAZETTE_SUM, CompressionCodec.SNAPPY, "s3://b/", 5.0)
    assert pickle.loads(pickle.dumps(fragment)) == fragment
