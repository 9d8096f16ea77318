"""The status page at ``/``, seen in a real headless Chromium as a person would.

A broker serves three journals (two written to, one read by a blocking reader) and a
pipeline has reported its lag and dedupe state. The page must show the journal names,
their write heads as the broker reports them, this broker as a member, the store as
healthy, the pipeline's lag and state, and keep itself current without a reload.
A screenshot is saved in the test's tmp dir. Under ``--auth-keys`` the page asks for
a LIST token (header or cookie) and shows only what the token may see.
"""

from __future__ import annotations

import base64
import threading
import time

import httpx
import pytest

from herald.auth import AuthKeys, Capability, Claims
from herald.protocol.labels import LabelSelector, rewrite_prefix_selector
from herald.testing import BrokerProcess, apply_specs, journal_spec, wait_until
from tests.broker.browser import full_page_screenshot, headless_chromium

JOURNALS = ("clicks/part-000", "clicks/part-001", "audit/log")
KEY = base64.b64encode(b"s" * 32).decode()


def write_head(http: httpx.Client, journal: str) -> int:
    return int(http.head(f"/{journal}", params={"offset": -1}).headers["X-Write-Head"])


def report(http: httpx.Client, heads: dict[str, int]) -> httpx.Response:
    return http.post("/v1/pipelines/report", json={
        "pipeline": "herald-dedupe", "batches": 7, "batch_duration_s": 1.25,
        "journals": [{"journal": j, "read_through": max(0, h - 100), "write_head": h} for j, h in heads.items()],
        "dedupe": {"state_keys": 12345, "state_bytes": 4 << 20, "effective_window_s": 28 * 86400,
                   "events_in": 20000, "events_out": 19880, "duplicates_dropped": 120}})


@pytest.fixture
def busy_broker(broker):
    apply_specs(broker.url, *(journal_spec(name, length=2048) for name in JOURNALS))
    with broker.client() as http:
        for i in range(40):
            http.put(f"/{JOURNALS[i % 2]}", content=f'{{"n": {i}, "pad": "{"x" * 200}"}}\n'.encode())
        http.put(f"/{JOURNALS[2]}", content=b'{"audit": 1}\n').raise_for_status()
        heads = {j: write_head(http, j) for j in JOURNALS[:2]}
        report(http, heads).raise_for_status()
    return broker


def test_page_shows_journals_heads_members_stores_and_pipelines_in_chromium(busy_broker, tmp_path):
    stop = threading.Event()
    reader = threading.Thread(target=_blocking_read, args=(busy_broker.url, JOURNALS[2], stop), daemon=True)
    reader.start()
    driver = headless_chromium()
    try:
        driver.get(busy_broker.url + "/")
        assert "Herald" in driver.title
        with busy_broker.client() as http:
            heads = {j: write_head(http, j) for j in JOURNALS}
        rows = dict(driver.execute_script(  # in one script: the page may swap itself in between calls
            "return [...document.querySelectorAll('#journals tbody tr')].map(r => [r.dataset.journal, r.innerText])"))
        assert set(rows) == set(JOURNALS)
        for journal, head in heads.items():
            assert f"{head:,}" in rows[journal], (journal, rows[journal])
            assert "content-type=application/x-ndjson" in rows[journal]
        members = text_of(driver, "#members")
        assert "this broker" in members and busy_broker.url.removeprefix("http://") in members
        stores = text_of(driver, "#stores")
        assert "file:///" in stores and "healthy" in stores and "unhealthy" not in stores
        assert text_of(driver, "#readiness").startswith("Ready")
        pipeline = text_of(driver, "[data-pipeline='herald-dedupe']")
        assert "12,345 keys" in pipeline and "4.0 MiB" in pipeline and "28d" in pipeline
        assert "clicks/part-000" in pipeline and "100 B" in pipeline  # its lag
        full_page_screenshot(driver, tmp_path / "status-page.png")

        # The page keeps itself current: a new append shows up without a reload.
        with busy_broker.client() as http:
            http.put(f"/{JOURNALS[0]}", content=b'{"late": true}\n').raise_for_status()
            head = write_head(http, JOURNALS[0])
        wait_until(lambda: f"{head:,}" in text_of(driver, f"[data-journal='{JOURNALS[0]}']"),
                   "the page to refresh itself")
    finally:
        stop.set()
        driver.quit()
    assert (tmp_path / "status-page.png").stat().st_size > 10_000


def text_of(driver, selector: str) -> str:
    """What a person reads in the element, taken in one script (the page refreshes
    itself by swapping its body, which would make a held element stale)."""
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''",
                                 selector)


def _blocking_read(url: str, journal: str, stop: threading.Event) -> None:
    """A reader that stays connected (shown as an active read in /metrics)."""
    try:
        with httpx.Client(base_url=url, timeout=httpx.Timeout(5, read=None)) as http, \
                http.stream("GET", f"/{journal}", params={"offset": 0, "block": "true"}) as resp:
            for _chunk in resp.iter_bytes():
                if stop.is_set():
                    return
    except httpx.HTTPError:
        return  # the broker was stopped at the end of the test


def sign(caps: int, selector: str = "") -> str:
    claims = Claims(caps, rewrite_prefix_selector(LabelSelector.parse(selector)), time.time() + 300)
    return AuthKeys.parse(KEY).sign(claims)


def test_page_under_auth_asks_for_a_list_token_and_hides_what_it_may_not_see(broker_factory, tmp_path):
    proc = broker_factory(tmp_path / "data", None, "--auth-keys", KEY)
    admin = {"Authorization": f"Bearer {sign(Capability.APPLY | Capability.APPEND)}"}
    with proc.client(headers=admin) as http:
        http.post("/v1/journals/apply", json={"changes": [
            {"upsert": journal_spec(n), "expect_mod_revision": 0} for n in JOURNALS]}).raise_for_status()
    with proc.client() as http:
        anonymous = http.get("/")
        assert anonymous.status_code == 401 and "text/html" in anonymous.headers["Content-Type"]
        assert 'id="token-form"' in anonymous.text and "clicks/" not in anonymous.text
        no_list = http.get("/", headers={"Authorization": f"Bearer {sign(Capability.READ)}"})
        assert no_list.status_code == 403 and "LIST" in no_list.text
        forged = http.get("/", cookies={"herald_token": "not-a-token"})
        assert forged.status_code == 401 and "clicks/" not in forged.text
        by_cookie = http.get("/", cookies={"herald_token": sign(Capability.LIST, "prefix=clicks/")})
        assert by_cookie.status_code == 200
        assert "clicks/part-000" in by_cookie.text and "audit/log" not in by_cookie.text
        by_header = http.get("/", headers={"Authorization": f"Bearer {sign(Capability.LIST)}"})
        assert "audit/log" in by_header.text
        # The stylesheet, the script and the probes need no token; reports need APPEND.
        assert http.get("/~status/status.css").status_code == 200
        assert http.get("/readyz").status_code in (200, 503) and http.get("/healthz").status_code == 200
        assert http.post("/v1/pipelines/report", json={"pipeline": "p"}).status_code == 401


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("status")).start()
    yield proc
    proc.kill()


@pytest.mark.parametrize(("body", "field"), [
    ({}, "pipeline"),
    ({"pipeline": ""}, "pipeline"),
    ({"pipeline": "p", "extra": 1}, "extra"),
    ({"pipeline": "p", "journals": [{"journal": "../etc", "read_through": 0, "write_head": 1}]}, "journals[0].journal"),
    ({"pipeline": "p", "journals": [{"journal": "a/b/c", "read_through": -1, "write_head": 1}]},
     "journals[0].read_through"),
    ({"pipeline": "p", "journals": "a/b"}, "journals"),
    ({"pipeline": "p", "dedupe": {"state_keys": "many"}}, "dedupe.state_keys"),
    ({"pipeline": "p", "dedupe": {"state_keys": 1e300}}, "dedupe.state_keys"),
    ({"pipeline": "p", "batches": True}, "batches"),
])
def test_hostile_pipeline_reports_are_refused_naming_the_field(shared_broker, body, field):
    with shared_broker.client() as http:
        resp = http.post("/v1/pipelines/report", json=body)
        assert resp.status_code == 400, resp.text
        assert resp.json()["field"] == field
        assert "data-pipeline" not in http.get("/").text  # nothing was recorded


def test_static_files_outside_the_list_are_not_found(shared_broker):
    with shared_broker.client() as http:
        assert http.get("/~status/status.js").status_code == 200
        assert http.get("/~status/..%2Fview.py").status_code == 404
        assert http.get("/~status/secret").status_code == 404
