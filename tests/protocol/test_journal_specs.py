"""Journal names, durations, and JournalSpec validation and YAML shape."""

import dataclasses

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from herald.protocol import (
    CompressionCodec,
    FragmentSpec,
    JournalFlags,
    JournalSpec,
    JournalSuspend,
    LabelSet,
    SuspendLevel,
    ValidationError,
    format_duration,
    is_readable,
    is_writable,
    parse_duration,
    split_journal_meta,
    validate_journal_name,
)
from herald.testing.tutorial import TUTORIAL_SPEC_YAML

TUTORIAL_YAML = TUTORIAL_SPEC_YAML


# -- names ---------------------------------------------------------------------

@pytest.mark.parametrize(
    "name",
    ["abcd", "a/b/c", "example/journal", "foo=bar/baz%2F", "a-b_c+d.e", "日本語/ジャーナル", "x" * 512, "a/..b/c.."],
)
def test_valid_journal_names(name):
    validate_journal_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "abc", "x" * 513, "../x/y", "a/../b", "a/..", "/abs/path", "a//b", "a/./b", "./ab", "abc/",
        "a b/c", "a#b/c", "journal;meta", "a\\b/c", "a?b=c", "", "a/\x00b",
    ],
)
def test_invalid_journal_names_are_rejected_with_their_field(name):
    with pytest.raises(ValidationError) as info:
        validate_journal_name(name, field="journal")
    assert info.value.field == "journal"


def test_split_journal_meta():
    assert split_journal_meta("a/b;reader-1") == ("a/b", "reader-1")
    assert split_journal_meta("a/b") == ("a/b", "")


# -- durations -----------------------------------------------------------------

@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"), (1, "1s"), (60, "1m0s"), (300, "5m0s"), (3600, "1h0m0s"), (5400, "1h30m0s"),
        (1.5, "1.5s"), (0.01, "10ms"), (0.0000015, "1.5µs"), (1e-9, "1ns"), (-90, "-1m30s"),
        (86400, "24h0m0s"),
    ],
)
def test_format_duration_matches_go(seconds, text):
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300s", 300), ("1h30m", 5400), ("10ms", 0.01), ("1.5h", 5400), ("2us", 2e-6), ("0", 0), (42, 42), (1.5, 1.5)],
)
def test_parse_duration_accepts_go_strings_and_numbers(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["300", "1x", "m", "", "1h 30m", True, None])
def test_parse_duration_rejects_unitless_or_garbage(text):
    with pytest.raises(ValidationError):
        parse_duration(text, "fragment.refresh_interval")


GO_MAX_MS = ((1 << 63) - 1) // 1_000_000  # Go's time.Duration: int64 nanoseconds


@given(st.integers(min_value=-GO_MAX_MS, max_value=GO_MAX_MS))
def test_duration_text_round_trips_at_millisecond_precision(ms):
    # Float seconds carry ~15 significant digits: compare relatively for huge durations.
    assert parse_duration(format_duration(ms / 1000)) == pytest.approx(ms / 1000, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("raw", ["2562048h", "9" * 30 + "h", 1e308, float("inf"), float("nan"), -1e12])
def test_durations_go_cannot_hold_are_refused_naming_the_field(raw):
    with pytest.raises(ValidationError) as err:
        parse_duration(raw, "fragment.retention")
    assert err.value.field == "fragment.retention" and "out of range" in err.value.message


# -- flags and codecs ----------------------------------------------------------

@pytest.mark.parametrize(
    ("flag", "readable", "writable"),
    [(0, True, True), (1, True, False), (2, False, True), (4, True, True)],
)
def test_flags_permissions(flag, readable, writable):
    assert (is_readable(flag), is_writable(flag)) == (readable, writable)
    assert JournalFlags(flag).is_readable() == readable


def test_codec_numbers_match_gazette():
    assert [c.value for c in CompressionCodec] == [0, 1, 2, 3, 4, 5]
    assert CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION == 5


# -- JournalSpec YAML ----------------------------------------------------------

def test_tutorial_spec_round_trips_through_from_dict_and_to_dict():
    doc = yaml.safe_load(TUTORIAL_YAML)
    spec = JournalSpec.from_dict(doc)
    assert spec.fragment == FragmentSpec(131072, CompressionCodec.SNAPPY, ("file:///",), 60.0)
    assert spec.labels.value_of("content-type") == "application/x-ndjson"
    assert spec.to_dict() == doc


def test_to_dict_omits_zero_values_and_writes_enum_names():
    spec = JournalSpec(
        "a/b/c",
        replication=3,
        labels=LabelSet.of("my-label", ""),
        fragment=FragmentSpec(retention_s=3600, flush_interval_s=60, compression_codec=CompressionCodec.GZIP),
        flags=JournalFlags.O_RDONLY,
        max_append_rate=1000,
        suspend=JournalSuspend(SuspendLevel.PARTIAL, 42),
    )
    assert spec.to_dict() == {
        "name": "a/b/c",
        "replication": 3,
        "labels": [{"name": "my-label"}],
        "fragment": {
            "length": 512 * 1024 * 1024,
            "compression_codec": "GZIP",
            "refresh_interval": "5m0s",
            "retention": "1h0m0s",
            "flush_interval": "1m0s",
        },
        "flags": "O_RDONLY",
        "max_append_rate": 1000,
        "suspend": {"level": "PARTIAL", "offset": 42},
    }
    assert JournalSpec.from_dict(spec.to_dict()) == spec


def test_from_dict_accepts_numbers_for_enums_and_durations():
    spec = JournalSpec.from_dict(
        {"name": "a/b/c", "flags": 2, "fragment": {"compression_codec": 2, "refresh_interval": 90, "retention": "1h30m"}}
    )
    assert spec.flags is JournalFlags.O_WRONLY
    assert spec.fragment.compression_codec is CompressionCodec.GZIP
    assert spec.fragment.refresh_interval_s == 90
    assert spec.fragment.retention_s == 5400


def test_defaults_are_herald_defaults():
    spec = JournalSpec.from_dict({"name": "a/b/c"})
    assert (spec.replication, spec.fragment.length, spec.fragment.compression_codec) == (
        1, 512 * 1024 * 1024, CompressionCodec.SNAPPY,
    )
    assert spec.fragment.refresh_interval_s == 300 and spec.fragment.stores == ()


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"bogus": 1}, "bogus"),
        ({"fragment": {"lenght": 1}}, "fragment.lenght"),
        ({"suspend": {"lvl": 1}}, "suspend.lvl"),
        ({"labels": [{"name": "aa", "valu": "x"}]}, "labels[0].valu"),
    ],
)
def test_unknown_keys_are_named(doc, field):
    with pytest.raises(ValidationError) as info:
        JournalSpec.from_dict({"name": "a/b/c", **doc})
    assert info.value.field == field


def test_missing_name_is_named_with_the_callers_prefix():
    with pytest.raises(ValidationError) as info:
        JournalSpec.from_dict({"replication": 1}, field_prefix="specs[3]")
    assert info.value.field == "specs[3].name"


def _lbl(*pairs):
    return [{"name": n, "value": v} for n, v in pairs]


# Every validation limit, with the field its error must name.
LIMITS = [
    ({"name": "../etc/passwd"}, "name"),
    ({"name": "abc"}, "name"),
    ({"replication": 0}, "replication"),
    ({"replication": 6}, "replication"),
    ({"replication": "3"}, "replication"),
    ({"labels": _lbl(("a", "x"))}, "labels[0].name"),
    ({"labels": _lbl(("aa", "x"), ("bb", "v" * 1025))}, "labels[1].value"),
    ({"labels": _lbl(("aa", "x"), ("name", "x"))}, "labels[1].name"),
    ({"labels": _lbl(("prefix", "a/"))}, "labels[0].name"),
    ({"labels": _lbl(("content-type", "a/b"), ("content-type", "c/d"))}, "labels[1]"),
    ({"labels": _lbl(("app.gazette.dev/region", "a"), ("app.gazette.dev/region", "b"))}, "labels[1]"),
    ({"labels": _lbl(("content-type", "not/a/mime"))}, "labels[0].value"),
    ({"labels": _lbl(("content-type", "text/"))}, "labels[0].value"),
    ({"labels": _lbl(("app.gazette.dev/message-type", "Foo"))}, "labels"),
    ({"labels": _lbl(("content-type", "a/b"), ("app.gazette.dev/message-subtype", "Foo"))}, "labels"),
    ({"fragment": {"length": 1023}}, "fragment.length"),
    ({"fragment": {"length": (1 << 34) + 1}}, "fragment.length"),
    ({"fragment": {"compression_codec": "LZ4"}}, "fragment.compression_codec"),
    ({"fragment": {"compression_codec": "INVALID"}}, "fragment.compression_codec"),
    ({"fragment": {"stores": ["s3://bucket/ok/", "s3://bucket/no-slash"]}}, "fragment.stores[1]"),
    ({"fragment": {"stores": ["relative/path/"]}}, "fragment.stores[0]"),
    ({"fragment": {"stores": "file:///"}}, "fragment.stores"),
    ({"fragment": {"compression_codec": "GZIP_OFFLOAD_DECOMPRESSION", "stores": ["file:///"]}}, "fragment.stores[0]"),
    ({"fragment": {"refresh_interval": "999ms"}}, "fragment.refresh_interval"),
    ({"fragment": {"refresh_interval": "24h0m1s"}}, "fragment.refresh_interval"),
    ({"fragment": {"refresh_interval": "soon"}}, "fragment.refresh_interval"),
    ({"fragment": {"flush_interval": "59s"}}, "fragment.flush_interval"),
    ({"fragment": {"path_postfix_template": "date={{ .Spool.FirstAppendTime"}}, "fragment.path_postfix_template"),
    ({"flags": 3}, "flags"),
    ({"flags": "O_APPEND"}, "flags"),
    ({"max_append_rate": -1}, "max_append_rate"),
    ({"suspend": {"level": "HALF"}}, "suspend.level"),
    ({"suspend": {"level": "FULL", "offset": -5}}, "suspend.offset"),
]


@pytest.mark.parametrize(("doc", "field"), LIMITS)
def test_every_validation_limit_names_its_field(doc, field):
    with pytest.raises(ValidationError) as info:
        JournalSpec.from_dict({"name": "a/b/c", **doc})
    assert info.value.field == field


@pytest.mark.parametrize(
    "fragment",
    [
        {"length": 1024}, {"length": 1 << 34}, {"refresh_interval": "1s"}, {"refresh_interval": "24h"},
        {"flush_interval": "1m"}, {"flush_interval": 0}, {"retention": "-1s"}, {"stores": []},
        {"compression_codec": "GZIP_OFFLOAD_DECOMPRESSION", "stores": ["s3://b/p/", "file:///"]},
        {"path_postfix_template": "date={{ .Spool.FirstAppendTime.Format \"2006-01-02\" }}"},
    ],
)
def test_values_at_the_limits_are_accepted(fragment):
    JournalSpec.from_dict({"name": "a/b/c", "fragment": fragment})


def test_validate_checks_directly_built_specs_too():
    spec = JournalSpec("a/b/c", fragment=FragmentSpec(stores=("gs://bucket",)))
    with pytest.raises(ValidationError) as info:
        spec.validate()
    assert info.value.field == "fragment.stores[0]"
    dataclasses.replace(spec, fragment=FragmentSpec(stores=("gs://bucket/",))).validate()


# -- property: from_dict(to_dict(spec)) == spec --------------------------------

specs = st.builds(
    JournalSpec,
    name=st.sampled_from(["a/b/c", "example/journal", "foo/bar=1/x%20"]),
    replication=st.integers(1, 5),
    labels=st.lists(
        st.tuples(st.sampled_from(["aa", "app.gazette.dev/tag", "my-label"]), st.sampled_from(["", "x", "y"])),
        max_size=4,
    ).map(lambda pairs: LabelSet.from_pairs([p for p in pairs if p[1]] or pairs[:1])),
    fragment=st.builds(
        FragmentSpec,
        length=st.integers(1 << 10, 1 << 34),
        compression_codec=st.sampled_from([c for c in CompressionCodec if c > 1 and c != 5]),
        stores=st.lists(st.sampled_from(["file:///", "s3://bucket/pre/", "gs://b/"]), max_size=2).map(tuple),
        refresh_interval_s=st.integers(1, 86400).map(float),
        retention_s=st.integers(0, 10**7).map(float),
        flush_interval_s=st.sampled_from([0.0, 60.0, 3600.0]),
        path_postfix_template=st.sampled_from(["", "{{ .Spool.Begin }}"]),
    ),
    flags=st.sampled_from(list(JournalFlags)),
    max_append_rate=st.integers(0, 10**9),
    suspend=st.builds(JournalSuspend, st.sampled_from(list(SuspendLevel)), st.integers(0, 10**12)),
)


@given(specs)
def test_yaml_shape_round_trips(spec):
    spec.validate()
    doc = spec.to_dict()
    assert JournalSpec.from_dict(yaml.safe_load(yaml.safe_dump(doc))) == spec
