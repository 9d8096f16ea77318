"""Hostile specs and bodies: a refused request changes nothing, and the broker restarts.

Each case was found by hand against an earlier broker: a store URL that passed the
spec checks but failed to open was saved anyway (and then stopped every restart), a
NUL in a URL or a huge number answered 500, and a body claiming a Content-Encoding
crashed the decoder. [I-APPLY-1] [I-RESTART-1]
"""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from herald.client import BrokerClient
from herald.protocol.labels import LabelSelector
from herald.testing import journal_spec, journals_state, seed_journal, wait_for_route

NAME = "hostile/journal"


def apply_raw(url: str, spec: dict, expect: int = -1) -> httpx.Response:
    return httpx.post(f"{url}/v1/journals/apply", timeout=30,
                      json={"changes": [{"upsert": spec, "expect_mod_revision": expect}]})


@pytest.fixture
def served(broker):
    return seed_journal(broker, NAME)


def assert_serving_after_restart(proc, before):
    """The broker survives a kill -9 and restart with the same journals and bytes."""
    proc.restart()
    assert journals_state(proc.url) == before
    with proc.client() as http:
        assert http.get(f"/{NAME}").content == b"seed\n"
        assert http.put(f"/{NAME}", content=b"ok\n").headers["X-Commit-Begin"] == "5"


@pytest.mark.parametrize("store, needle", [
    ("file:///../", "clean"),
    ("file:////etc/", "clean"),
    ("file://host/path/", "no host"),
    ("file:///\u0000/", "control character"),
    ("file:///a\nb/", "control character"),
    ("gs:///path/", "bucket"),
    ("gs://bucket/", "gcsfs"),      # passes the URL checks, but cannot open here
    ("az://account/", "adlfs"),
])
def test_a_store_that_cannot_open_is_refused_and_saves_nothing(served, store, needle):
    before = journals_state(served.url)
    spec = journal_spec("hostile/other", stores=[store])

    resp = apply_raw(served.url, spec)

    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == "changes[0].upsert.fragment.stores[0]"
    assert needle in resp.json()["message"]
    assert journals_state(served.url) == before
    # A later valid apply is unaffected (it used to answer 400 and commit anyway).
    assert apply_raw(served.url, journal_spec("hostile/later")).status_code == 200
    assert_serving_after_restart(served, journals_state(served.url))


@pytest.mark.parametrize("path, value", [
    (("fragment", "flush_interval"), "9" * 30 + "h"),
    (("fragment", "retention"), 1e308),
    (("fragment", "refresh_interval"), "2562048h"),
    (("max_append_rate",), 10**20),
    (("max_append_rate",), 1e20),
    (("suspend", "offset"), 10**20),
    (("replication",), 2**64),
])
def test_numbers_beyond_int64_are_a_400_naming_the_field(served, path, value):
    before = journals_state(served.url)
    spec = journal_spec("hostile/huge")
    target = spec
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value

    resp = apply_raw(served.url, spec)

    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == "changes[0].upsert." + ".".join(path)
    assert journals_state(served.url) == before
    assert_serving_after_restart(served, before)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "x-bogus"])
@pytest.mark.parametrize("path", [f"/{NAME}", f"/v1/journals/append?journal={NAME}"])
def test_encoded_request_bodies_are_refused_before_anything_is_written(served, encoding, path):
    with served.client() as http:
        put = http.put if path.startswith(f"/{NAME}") else http.post
        resp = put(path, content=b"not compressed at all\n", headers={"Content-Encoding": encoding})
        assert resp.status_code == 415, resp.text
        assert resp.json()["field"] == "Content-Encoding"
        assert http.get(f"/{NAME}").content == b"seed\n"


@pytest.fixture
def peer_served(etcd, broker_factory, tmp_path, request):
    """A one-broker cluster serving the seeded journal: peer endpoints exist only in
    a cluster (an embedded broker refuses them all), and the hostile peer below holds
    real peer credentials, so these cases reach the endpoints' own validation."""
    prefix = f"/herald/test/hostile-{request.node.name}"
    proc = broker_factory(tmp_path / "data", None, "--etcd", etcd.url, "--etcd.prefix", prefix,
                          "--etcd.lease", "4s")
    seed_journal(proc, NAME)
    with BrokerClient(proc.url) as client:
        wait_for_route(client, NAME, 1)
    proc.prefix = prefix
    return proc


def peer_headers(proc) -> dict[str, str]:
    """What a peer sends: the primary header (from what members/list hands out) and a
    REPLICATE token signed with the cluster's peer secret, read from etcd as a broker does."""
    from herald.auth import AuthKeys, Capability, Claims
    from herald.broker.replication import PRIMARY_HEADER
    from herald.keyspace.routes import MemberId

    [member] = httpx.post(f"{proc.url}/v1/members/list", json={}, timeout=30).json()["members"]
    etcd_url = proc.extra_args[proc.extra_args.index("--etcd") + 1]
    key = base64.b64encode(f"{proc.prefix}/peer-secret".encode()).decode()
    [kv] = httpx.post(f"{etcd_url}/v3/kv/range", json={"key": key}, timeout=5).json()["kvs"]
    token = AuthKeys([base64.b64decode(kv["value"])], allows_anonymous=False).sign(
        Claims(Capability.REPLICATE, LabelSelector.parse(f"name={NAME}"), time.time() + 60))
    return {PRIMARY_HEADER: str(MemberId(member["zone"], member["suffix"])), "Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("body, field", [
    (b'{"end": 1e300, "registers": [], "fragment_begin": 0}', "end"),
    (b'{"end": -1, "registers": [], "fragment_begin": 0}', "end"),
    (b'{"end": 9223372036854775808, "registers": [], "fragment_begin": 0}', "end"),
    (b'{"end": 10, "registers": [], "fragment_begin": 11}', "fragment_begin"),
    (b'{"end": 10, "registers": "x", "fragment_begin": 0}', "registers"),
    (b'{"end": 10, "registers": [{"name": "BAD NAME"}], "fragment_begin": 0}', "registers[0].name"),
    (b'{"end": "ten", "registers": [], "fragment_begin": 0}', "end"),
    (b'[1, 2]', "body"),
    (b'{not json', "body"),
])
@pytest.mark.slow
def test_hostile_peer_sync_is_a_400_and_leaves_the_spool_intact(peer_served, body, field):
    served = peer_served
    resp = httpx.post(f"{served.url}/v1/replicate/sync", params={"journal": NAME}, content=body,
                      headers=peer_headers(served), timeout=30)

    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == field
    # The journal's spool descriptor is still its own: appends land and read back exactly.
    with served.client() as http:
        for i in range(20):
            http.put(f"/{NAME}", content=b"after %d\n" % i).raise_for_status()
        expected = b"seed\n" + b"".join(b"after %d\n" % i for i in range(20))
        assert http.get(f"/{NAME}").content == expected
    port = served.port
    assert served.terminate() == 0  # gracefully: the lease is revoked, so the restart need not wait
    served.start(port)
    with served.client() as http:
        assert http.get(f"/{NAME}").content == expected


@pytest.mark.parametrize("header", ["X-Union-Registers", "X-Subtract-Registers"])
def test_a_prefix_label_in_a_register_set_is_refused(served, header):
    with served.client() as http:
        resp = http.put(f"/{NAME}", content=b"x\n", headers={header: "owner=a,prefix=foo/"})
        assert resp.status_code == 400 and resp.json()["field"] == header
        assert "selector" in resp.json()["message"]
        assert http.get(f"/{NAME}").content == b"seed\n"
