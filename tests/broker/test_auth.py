"""JWT authorization (Gazette's model) against a real broker run with ``--auth-keys``.

The matrix: five capabilities × three selectors × ten endpoints × three journals
(450 requests). A missing capability is 403; a journal outside the token's selector
answers exactly as a journal that does not exist; list shows only what the selector
sees; an apply is checked against the labels it writes, a delete against the name;
the peer endpoints refuse everyone on an embedded broker. Nothing a refused request
carries changes a journal. ``/v1/openapi.json`` and ``/debug/metrics`` stay open.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time

import httpx
import pytest

from herald.auth import AuthKeys, Capability, Claims
from herald.broker.peer_stream import frame_head
from herald.client import BrokerClient, ClientSecurity, RetryReader
from herald.protocol.errors import HeraldError, Status
from herald.protocol.labels import LabelSelector, LabelSet, rewrite_prefix_selector
from herald.testing import BrokerProcess, journal_spec, journals_state

KEY = base64.b64encode(b"k" * 32).decode()
OLD_KEY = base64.b64encode(b"o" * 32).decode()
OTHER_KEY = base64.b64encode(b"x" * 32).decode()
JOURNALS = {"events/a": "a", "events/b": "b", "other/c": "c"}  # name → team label
SELECTORS = {"all": "", "prefix": "prefix=events/", "team-a": "team=a"}
CAPS = [Capability.LIST, Capability.APPLY, Capability.READ, Capability.APPEND, Capability.REPLICATE]
STALE_REVISION = 999_999  # an apply that passes authorization but is refused (409), changing nothing


def sign(caps: int, selector: str = "", ttl_s: float = 300, key: str = KEY) -> str:
    claims = Claims(caps, rewrite_prefix_selector(LabelSelector.parse(selector)), time.time() + ttl_s)
    return AuthKeys.parse(key).sign(claims)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def spec(name: str) -> dict:
    doc = journal_spec(name)
    doc["labels"].append({"name": "team", "value": JOURNALS.get(name, "z")})
    return doc


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker requiring tokens (two keys: rotation), seeded with three journals."""
    proc = BrokerProcess(tmp_path_factory.mktemp("auth"), None, "--auth-keys", f"{KEY},{OLD_KEY}").start()
    admin = bearer(sign(Capability.APPLY | Capability.APPEND))
    with proc.client(headers=admin) as http:
        http.post("/v1/journals/apply", json={"changes": [
            {"upsert": spec(n), "expect_mod_revision": 0} for n in JOURNALS]}).raise_for_status()
        for name in JOURNALS:
            http.put(f"/{name}", content=f'{{"seed": "{name}"}}\n'.encode()).raise_for_status()
    yield proc
    proc.kill()


def state(proc: BrokerProcess) -> dict:
    """What a refused request must not change."""
    return journals_state(proc.url, bearer(sign(Capability.LIST | Capability.READ)))


def requests_for(journal: str) -> dict[str, tuple[int, str, str, dict]]:
    """endpoint → (capability, method, path, httpx kwargs), each aimed at ``journal``."""
    return {
        "gateway GET": (Capability.READ, "GET", f"/{journal}", {}),
        "gateway HEAD": (Capability.READ, "HEAD", f"/{journal}", {}),
        "gateway PUT": (Capability.APPEND, "PUT", f"/{journal}", {"content": b'{"x": 1}\n'}),
        "append": (Capability.APPEND, "POST", "/v1/journals/append",
                   {"params": {"journal": journal}, "content": b'{"x": 2}\n'}),
        "fragments": (Capability.READ, "POST", "/v1/journals/fragments", {"json": {"journal": journal}}),
        "prune": (Capability.APPLY, "POST", "/v1/journals/prune", {"json": {"journal": journal, "dry_run": True}}),
        "list": (Capability.LIST, "POST", "/v1/journals/list", {"json": {"selector": f"name={journal}"}}),
        "members/list": (Capability.LIST, "POST", "/v1/members/list", {"json": {}}),
        "apply": (Capability.APPLY, "POST", "/v1/journals/apply", {"json": {"changes": [
            {"upsert": spec(journal), "expect_mod_revision": STALE_REVISION}]}}),
        "replicate/stream": (Capability.REPLICATE, "POST", "/v1/replicate/stream", {
            "params": {"journal": journal}, "content": frame_head(0, 0, 5, LabelSet()) + b"evil\n",
            "headers": {"X-Herald-Primary": "local#x"}}),
    }


def expected_status(endpoint: str, method: str, needed: int, cap: int, sees: bool) -> int:
    """What the matrix expects: the capability is judged first, then the selector."""
    if needed != cap or endpoint == "replicate/stream":  # an embedded broker has no peers
        return 403
    if endpoint == "apply":  # judged by the labels it writes, then refused as stale
        return 409 if sees else 403
    if endpoint in ("list", "members/list"):  # list filters; it never refuses a journal
        return 200
    if not sees:
        return 404
    return {"GET": 206, "HEAD": 200, "PUT": 204}.get(method, 200)


@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("cap", CAPS, ids=lambda c: c.name)
def test_capability_and_selector_matrix_over_every_journal_endpoint(secured, cap, selector):
    token_selector = LabelSelector.parse(SELECTORS[selector])
    before = state(secured)
    with secured.client(headers=bearer(sign(cap, SELECTORS[selector]))) as http:
        for journal, team in JOURNALS.items():
            sees = rewrite_prefix_selector(token_selector).matches(
                LabelSelector.parse(f"name={journal},team={team}").include)
            for endpoint, (needed, method, path, kw) in requests_for(journal).items():
                resp = http.request(method, path, **kw)
                expected = expected_status(endpoint, method, needed, cap, sees)
                assert resp.status_code == expected, (endpoint, journal, resp.status_code, resp.text)
                if expected in (403, 404, 409) and method != "HEAD":
                    assert resp.json()["status"] == {403: "PERMISSION_DENIED", 404: "JOURNAL_NOT_FOUND",
                                                     409: "ETCD_TRANSACTION_FAILED"}[expected]
                if endpoint == "list" and expected == 200:
                    assert [j["spec"]["name"] for j in resp.json()["journals"]] == ([journal] if sees else [])
    after = state(secured)
    if cap != Capability.APPEND:
        assert after == before  # nothing but an allowed append may change a journal


def test_a_hidden_journal_answers_exactly_like_a_missing_one(secured):
    with secured.client(headers=bearer(sign(Capability.READ | Capability.APPEND, "team=a"))) as http:
        for method, kw in (("GET", {}), ("PUT", {"content": b"x\n"})):
            hidden = http.request(method, "/events/b", **kw)
            missing = http.request(method, "/events/nope", **kw)
            assert hidden.status_code == missing.status_code == 404
            assert hidden.json()["message"].replace("events/b", "J") == \
                missing.json()["message"].replace("events/nope", "J")


@pytest.mark.parametrize("selector", SELECTORS)
def test_list_and_watch_show_only_what_the_selector_sees(secured, selector):
    expected = {"all": set(JOURNALS), "prefix": {"events/a", "events/b"}, "team-a": {"events/a"}}[selector]
    with secured.client(headers=bearer(sign(Capability.LIST, SELECTORS[selector]))) as http:
        listed = http.post("/v1/journals/list", json={}).json()["journals"]
        assert {j["spec"]["name"] for j in listed} == expected
        with http.stream("POST", "/v1/journals/list", json={"watch": True}) as watch:
            first = next(watch.iter_lines())
    assert {j["spec"]["name"] for j in httpx.Response(200, content=first).json()["journals"]} == expected


def test_apply_checks_the_new_labels_and_delete_checks_the_name(secured):
    before = state(secured)
    token = sign(Capability.APPLY, "prefix=events/")
    with secured.client(headers=bearer(token)) as http:
        outside = http.post("/v1/journals/apply", json={"changes": [
            {"upsert": spec("events/new"), "expect_mod_revision": 0},
            {"upsert": spec("other/new"), "expect_mod_revision": 0}]})
        delete = http.post("/v1/journals/apply", json={"changes": [{"delete": "other/c", "expect_mod_revision": -1}]})
        assert (outside.status_code, outside.json()["field"]) == (403, "changes[1]")
        assert delete.status_code == 403 and delete.json()["status"] == "PERMISSION_DENIED"
        assert state(secured) == before  # all or nothing: events/new was not created either
        inside = http.post("/v1/journals/apply", json={"changes": [{"upsert": spec("events/new"), "expect_mod_revision": 0}]})
        assert inside.status_code == 200
        gone = http.post("/v1/journals/apply", json={"changes": [{"delete": "events/new", "expect_mod_revision": -1}]})
        assert gone.status_code == 200


@pytest.mark.parametrize("header, message", [
    (None, "bearer token is required"),
    ("Basic dXNlcjpwYXNz", "Bearer"),
    ("Bearer", "Bearer"),
    ("Bearer not-a-jwt", "invalid token"),
    ("Bearer " + sign(Capability.LIST, key=OTHER_KEY), "invalid token"),
    ("Bearer " + sign(Capability.LIST, ttl_s=-60), "expired"),
    ("Bearer " + sign(Capability.LIST)[:-4] + "AAAA", "invalid token"),
], ids=["none", "basic", "bearer-alone", "not-a-jwt", "other-key", "expired", "bad-signature"])  # tokens hold times: ids stay the same for pytest-xdist's workers
def test_missing_malformed_forged_and_expired_tokens_are_401(secured, header, message):
    headers = {"Authorization": header} if header else {}
    resp = httpx.post(f"{secured.url}/v1/journals/list", json={}, headers=headers, timeout=10)
    assert resp.status_code == 401, resp.text
    assert resp.json()["status"] == "UNAUTHORIZED" and message in resp.json()["message"]
    assert "Traceback" not in resp.text


def test_any_key_verifies_so_keys_rotate(secured):
    resp = httpx.post(f"{secured.url}/v1/journals/list", json={},
                      headers=bearer(sign(Capability.LIST, key=OLD_KEY)), timeout=10)
    assert resp.status_code == 200 and len(resp.json()["journals"]) == len(JOURNALS)


@pytest.mark.parametrize("header", [None, "Bearer not-a-jwt", "Bearer " + sign(Capability.LIST, key=OTHER_KEY)],
                         ids=["none", "not-a-jwt", "other-key"])
def test_metrics_and_the_api_contract_stay_open_under_auth(secured, header):
    headers = {"Authorization": header} if header else {}
    metrics = httpx.get(f"{secured.url}/debug/metrics", headers=headers, timeout=10)
    contract = httpx.get(f"{secured.url}/v1/openapi.json", headers=headers, timeout=10)
    assert metrics.status_code == contract.status_code == 200
    assert "herald_" in metrics.text and contract.json()["openapi"].startswith("3.")


def herald_cli(*args: str, env: dict[str, str] | None = None) -> str:
    """``herald <args>`` as a subprocess (the way an operator runs it); its stdout."""
    done = subprocess.run([sys.executable, "-m", "herald.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_cli_minted_token_is_allowed_for_its_caps_and_selector_only(secured):
    token = herald_cli("auth", "token", "--auth-keys", KEY, "--cap", "READ,LIST", "-l", "prefix=events/",
                       "--ttl", "5m")
    with secured.client(headers=bearer(token)) as http:
        assert http.get("/events/a", params={"block": "false"}).content.startswith(b'{"seed"')
        assert [j["spec"]["name"] for j in http.post("/v1/journals/list", json={}).json()["journals"]] == \
            ["events/a", "events/b"]
        assert http.get("/other/c").status_code == 404  # outside the selector: as if missing
        assert http.put("/events/a", content=b"x\n").status_code == 403  # APPEND not granted
        assert http.post("/v1/journals/prune", json={"journal": "events/a", "dry_run": True}).status_code == 403


def test_serve_reads_auth_keys_from_the_environment(broker_factory, tmp_path):
    env = {"HERALD_AUTH_KEYS": KEY}
    proc = broker_factory(tmp_path / "env", None, env=env)  # no --auth-keys flag
    assert httpx.post(f"{proc.url}/v1/journals/list", json={}, timeout=10).status_code == 401
    token = herald_cli("auth", "token", "--cap", "LIST", "--ttl", "1m", env=env)  # the CLI reads it too
    listed = httpx.post(f"{proc.url}/v1/journals/list", json={}, headers=bearer(token), timeout=10)
    assert listed.status_code == 200 and listed.json()["journals"] == []
    forged = sign(Capability.LIST, key=OTHER_KEY)
    assert httpx.post(f"{proc.url}/v1/journals/list", json={}, headers=bearer(forged), timeout=10).status_code == 401


def test_python_client_sends_the_token_from_its_settings_or_environment(secured, monkeypatch):
    token = sign(Capability.READ | Capability.LIST, "prefix=events/")
    with BrokerClient(secured.url, security=ClientSecurity(auth_token=token)) as client:
        assert [i.name for i in client.list("")] == ["events/a", "events/b"]
        assert b"".join(c for _, c in RetryReader(client, "events/a", block=False)).startswith(b'{"seed"')
    monkeypatch.setenv("BROKER_AUTH_TOKEN", token)
    with BrokerClient(secured.url) as client:
        assert len(client.list("")) == 2
        with pytest.raises(HeraldError) as denied:
            client.append("events/a", b"x\n")
    assert denied.value.status is Status.PERMISSION_DENIED
    assert "***" in repr(ClientSecurity.from_env()) and token not in repr(ClientSecurity.from_env())


def test_anonymous_key_admits_token_less_requests_but_still_checks_tokens(broker_factory, tmp_path):
    proc = broker_factory(tmp_path / "d", None, "--auth-keys", f"{KEY} AA==")
    assert httpx.post(f"{proc.url}/v1/journals/list", json={}, timeout=10).status_code == 200
    forged = httpx.post(f"{proc.url}/v1/journals/list", json={}, timeout=10,
                        headers=bearer(sign(Capability.LIST, key=OTHER_KEY)))
    assert forged.status_code == 401


def test_bad_auth_keys_stop_the_broker_with_one_line(tmp_path):
    with pytest.raises(RuntimeError, match="auth-keys.*not base64"):
        BrokerProcess(tmp_path / "d", None, "--auth-keys", "not*base64").start()
