"""Bad input gets a clear 4xx naming the field, changes nothing, and the broker keeps serving."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from herald.testing import apply_specs, journal_spec, seed_journal

NAME = "bad/journal"


def raw_put(url: str, path: str, body: bytes) -> tuple[int, dict]:
    """A PUT whose path goes on the wire exactly as given."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


@pytest.fixture
def served(broker):
    return seed_journal(broker, NAME)


def assert_unchanged_and_serving(proc):
    with proc.client() as http:
        assert http.get(f"/{NAME}").content == b"seed\n"
        assert http.put(f"/{NAME}", content=b"ok\n").headers["X-Commit-Begin"] == "5"


@pytest.mark.parametrize("path, field", [
    ("/a/../../etc/passwd", "journal"),
    ("/abc", "journal"),            # too short (4..512)
    ("/a//b/c", "journal"),         # not a clean path
    ("/" + "x" * 513, "journal"),
    ("/bad/jour%20nal", "journal"),
])
def test_invalid_journal_names_are_rejected_with_400(served, path, field):
    status, body = raw_put(served.url, path, b"evil\n")  # httpx would normalise ``..`` away
    assert status == 400
    assert body["status"] == "INVALID_ARGUMENT"
    assert body["field"] == field
    assert not any(p.name == "passwd" for p in served.file_root.rglob("*"))
    assert_unchanged_and_serving(served)


def test_unknown_journal_is_404(served):
    with served.client() as http:
        for method in ("GET", "PUT"):
            resp = http.request(method, "/no/such/journal", content=b"x" if method == "PUT" else None)
            assert resp.status_code == 404
            assert resp.json()["status"] == "JOURNAL_NOT_FOUND"
    assert_unchanged_and_serving(served)


@pytest.mark.parametrize("params, field", [
    ({"offset": "abc"}, "offset"),
    ({"offset": "-2"}, "offset"),
    ({"block": "maybe"}, "block"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_read_parameters_are_400_naming_the_parameter(served, params, field):
    with served.client() as http:
        resp = http.get(f"/{NAME}", params=params)
    assert resp.status_code == 400
    assert resp.json()["field"] == field
    assert_unchanged_and_serving(served)


def test_oversized_append_is_413_and_writes_nothing(broker_factory):
    proc = broker_factory(None, None, "--max-append-bytes", "1024")
    apply_specs(proc.url, journal_spec(NAME))
    with proc.client() as http:
        http.put(f"/{NAME}", content=b"seed\n")
        resp = http.put(f"/{NAME}", content=b"x" * 2048)
        assert resp.status_code == 413
        assert resp.json()["status"] == "PAYLOAD_TOO_LARGE"

        def chunks():  # no Content-Length: the limit applies while streaming
            yield b"y" * 1000
            yield b"y" * 1000
        assert http.put(f"/{NAME}", content=chunks()).status_code == 413
    assert_unchanged_and_serving(proc)


@pytest.mark.parametrize("spec, field", [
    ({"name": "ok/journal", "replication": 9}, "changes[0].upsert.replication"),
    ({"name": "../escape", "replication": 1}, "changes[0].upsert.name"),
    ({"name": "ok/journal", "replication": 1, "fragment": {"length": 10}},
     "changes[0].upsert.fragment.length"),
    ({"name": "ok/journal", "replication": 1, "fragment": {"stores": ["no-scheme"]}},
     "changes[0].upsert.fragment.stores[0]"),
    ({"name": "ok/journal", "replication": 1, "bogus": 1}, "changes[0].upsert.bogus"),
    ({"name": "ok/journal", "replication": 1, "labels": 5}, "changes[0].upsert.labels"),  # was a 500
])
def test_malformed_specs_are_rejected_naming_the_field(served, spec, field):
    resp = httpx.post(f"{served.url}/v1/journals/apply",
                      json={"changes": [{"upsert": spec, "expect_mod_revision": 0}]})
    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == field
    listed = httpx.post(f"{served.url}/v1/journals/list", json={}).json()["journals"]
    assert [j["spec"]["name"] for j in listed] == [NAME]
    assert_unchanged_and_serving(served)


def test_malformed_register_header_is_400_naming_the_header(served):
    with served.client() as http:
        resp = http.put(f"/{NAME}", content=b"x\n", headers={"X-Check-Registers": "a in (b"})
    assert resp.status_code == 400
    assert resp.json()["field"] == "X-Check-Registers"
    assert_unchanged_and_serving(served)


def test_invalid_json_body_is_400(served):
    resp = httpx.post(f"{served.url}/v1/journals/apply", content=b"{nope")
    assert resp.status_code == 400
    assert resp.json()["field"] == "body"
    assert_unchanged_and_serving(served)
