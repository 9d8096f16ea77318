"""Statuses, the HTTP table, and typed errors surviving a JSON/pickle round trip."""

import pickle

import pytest

from herald.protocol import (
    HTTP_CODES,
    HeraldError,
    JournalNotFoundError,
    LabelSet,
    OffsetNotYetAvailableError,
    RegisterMismatchError,
    Status,
    ValidationError,
    join_field,
    with_field_prefix,
)

GAZETTE_STATUSES = [
    "OK", "JOURNAL_NOT_FOUND", "NO_JOURNAL_PRIMARY_BROKER", "NOT_JOURNAL_PRIMARY_BROKER",
    "INSUFFICIENT_JOURNAL_BROKERS", "NOT_JOURNAL_BROKER", "OFFSET_NOT_YET_AVAILABLE",
    "WRONG_ROUTE", "PROPOSAL_MISMATCH", "ETCD_TRANSACTION_FAILED", "NOT_ALLOWED",
    "WRONG_APPEND_OFFSET", "INDEX_HAS_GREATER_OFFSET", "REGISTER_MISMATCH", "SUSPENDED",
    "FRAGMENT_STORE_UNHEALTHY",
]


def test_every_status_has_an_http_code():
    assert set(HTTP_CODES) == set(Status)
    assert all(100 <= code <= 599 for code in HTTP_CODES.values())


def test_gazette_statuses_keep_their_wire_numbers():
    assert [Status[name].value for name in GAZETTE_STATUSES] == list(range(16))


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (Status.OK, 200), (Status.JOURNAL_NOT_FOUND, 404), (Status.NOT_JOURNAL_PRIMARY_BROKER, 421),
        (Status.OFFSET_NOT_YET_AVAILABLE, 416), (Status.REGISTER_MISMATCH, 412),
        (Status.SUSPENDED, 423), (Status.INVALID_ARGUMENT, 400), (Status.CLIENT_CLOSED_REQUEST, 499),
        (Status.INTERNAL, 500), (Status.WRONG_APPEND_OFFSET, 409),
    ],
)
def test_http_code_table_entries(status, code):
    assert HTTP_CODES[status] == code
    assert HeraldError(status, "x").http_code == code


def test_validation_error_str_names_the_field():
    err = ValidationError("fragment.length", "too small")
    assert str(err) == "fragment.length: too small"
    assert err.status is Status.INVALID_ARGUMENT and err.http_code == 400
    assert str(ValidationError(None, "bad")) == "bad"


@pytest.mark.parametrize(
    "err",
    [
        ValidationError("fragment.stores[0]", "bad URL"),
        JournalNotFoundError("a/b/c"),
        RegisterMismatchError("mismatch", LabelSet.of("author", "7")),
        OffsetNotYetAvailableError("not yet", write_head=1234),
        HeraldError(Status.SUSPENDED, "suspended"),
    ],
)
def test_errors_round_trip_through_dict_and_pickle_as_the_same_type(err):
    for back in (HeraldError.from_dict(err.to_dict()), pickle.loads(pickle.dumps(err))):
        assert type(back) is type(err)
        assert back.to_dict() == err.to_dict()
        assert str(back) == str(err)


def test_typed_errors_expose_their_extra_data():
    assert JournalNotFoundError("a/b").journal == "a/b"
    assert OffsetNotYetAvailableError("x", write_head=9).write_head == 9
    err = HeraldError.from_dict(RegisterMismatchError("m", LabelSet.of("owner", "a")).to_dict())
    assert err.registers == LabelSet.of("owner", "a")
    assert err.to_dict()["registers"] == [{"name": "owner", "value": "a"}]


def test_unknown_status_from_a_newer_server_becomes_internal():
    err = HeraldError.from_dict({"status": "SOMETHING_NEW", "message": "?"})
    assert err.status is Status.INTERNAL and err.message == "?"


def test_with_field_prefix_extends_nested_paths():
    with pytest.raises(ValidationError) as info:
        with with_field_prefix("fragment"):
            with with_field_prefix("stores"):
                raise ValidationError("[0]", "bad")
    assert info.value.field == "fragment.stores[0]"


def test_with_field_prefix_leaves_other_errors_alone():
    with pytest.raises(JournalNotFoundError) as info:
        with with_field_prefix("fragment"):
            raise JournalNotFoundError("a/b")
    assert info.value.field is None


@pytest.mark.parametrize(
    ("prefix", "field", "joined"),
    [("a", "b", "a.b"), ("a", "[1]", "a[1]"), ("", "b", "b"), ("a", None, "a"), ("a[2]", "name", "a[2].name")],
)
def test_join_field(prefix, field, joined):
    assert join_field(prefix, field) == joined
