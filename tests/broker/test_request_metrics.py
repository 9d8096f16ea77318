"""``herald_broker_requests_total`` counts every request by operation and status,
whichever front end served it: plain appends take the httptools fast path
(`herald.broker.front`), reads and refusals go through aiohttp's middleware."""

from __future__ import annotations

import re

import httpx

from herald.testing import apply_specs, journal_spec


def requests_total(url: str, op: str, status: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    found = re.search(rf'herald_broker_requests_total{{op="{op}",status="{status}"}} ([0-9.e+]+)', text)
    return float(found.group(1)) if found else 0.0


def test_fast_path_appends_and_gateway_reads_are_both_counted(broker):
    apply_specs(broker.url, journal_spec("metrics/a"))
    appends, reads = requests_total(broker.url, "append", "OK"), requests_total(broker.url, "read", "OK")
    with httpx.Client(base_url=broker.url) as http:
        for i in range(5):
            assert http.put("/metrics/a", content=f"line {i}\n".encode()).status_code == 204
        assert http.get("/metrics/a", params={"offset": 0}).status_code in (200, 206)
        assert http.put("/metrics/missing", content=b"x\n").status_code == 404
    assert requests_total(broker.url, "append", "OK") == appends + 5
    assert requests_total(broker.url, "read", "OK") == reads + 1
    assert requests_total(broker.url, "append", "JOURNAL_NOT_FOUND") >= 1
