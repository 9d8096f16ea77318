"""Per-group commit metrics, counted on the loop (`herald.broker.metrics.count_group`)
and exported at scrape time: exactly as many groups, bytes and appends as were
committed, under the names, labels and layout prometheus_client's labelled
`Counter` gave them."""

from __future__ import annotations

import concurrent.futures as cf
import re

import httpx
from prometheus_client import CollectorRegistry, Counter, generate_latest

from herald.broker.loop_metrics import JournalCounter
from herald.testing import apply_specs, journal_spec

JOURNALS = [f"groups/j{i:02d}" for i in range(16)]
APPENDS_PER_JOURNAL = 12


def scrape(url: str) -> str:
    return httpx.get(f"{url}/metrics").text


def per_journal(text: str, family: str) -> dict[str, float]:
    return {j: float(v) for j, v in re.findall(rf'^{family}{{journal="([^"]+)"}} (\S+)$', text, re.M)}


def plain(text: str, sample: str) -> float:
    found = re.search(rf"^{sample} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_group_counts_match_the_appends_over_16_journals(broker):
    apply_specs(broker.url, *(journal_spec(name) for name in JOURNALS))
    before = scrape(broker.url)
    bodies = {name: [f"{name} line {i}\n".encode() for i in range(APPENDS_PER_JOURNAL)] for name in JOURNALS}

    def write(name: str) -> list[int]:  # one writer per journal, all at once: groups of many sizes
        with httpx.Client(base_url=broker.url) as http:
            return [http.put(f"/{name}", content=body).status_code for body in bodies[name]]

    with cf.ThreadPoolExecutor(len(JOURNALS)) as pool:
        statuses = [s for codes in pool.map(write, JOURNALS) for s in codes]
    assert statuses == [204] * len(JOURNALS) * APPENDS_PER_JOURNAL
    after = scrape(broker.url)

    appended = per_journal(after, "herald_broker_appended_bytes_total")
    groups = per_journal(after, "herald_broker_append_groups_total")
    for name in JOURNALS:
        assert appended[name] == sum(len(b) for b in bodies[name])  # fresh journals: nothing before
        assert 1 <= groups[name] <= APPENDS_PER_JOURNAL
        assert re.search(rf'^herald_broker_append_groups_created{{journal="{name}"}} \S+$', after, re.M)
    appends = plain(after, "herald_broker_append_group_appends_sum") - plain(
        before, "herald_broker_append_group_appends_sum")
    group_count = plain(after, "herald_broker_append_group_appends_count") - plain(
        before, "herald_broker_append_group_appends_count")
    assert appends == len(JOURNALS) * APPENDS_PER_JOURNAL
    assert group_count == sum(groups[name] for name in JOURNALS)
    group_bytes = plain(after, "herald_broker_append_group_bytes_sum") - plain(
        before, "herald_broker_append_group_bytes_sum")
    assert group_bytes == sum(appended[name] for name in JOURNALS)


def test_journal_counter_exposition_is_prometheus_clients_counter():
    real, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("herald_test_bytes", "Bytes of a test", ["journal"], registry=real)
    journal_counter = JournalCounter("herald_test_bytes", "Bytes of a test", registry=ours)
    for journal, amount in [("a/b", 3), ("c", 1024), ("a/b", 5), ("d/e/f", 1)]:
        counter.labels(journal).inc(amount)
        journal_counter.child(journal)[0] += amount
    created = re.compile(r"^(\w+_created\{[^}]*\}) \S+$", re.M)  # when each child was made: differs
    assert created.sub(r"\1 T", generate_latest(ours).decode()) == created.sub(
        r"\1 T", generate_latest(real).decode())
    totals = {s.labels["journal"]: s.value for s in journal_counter.collect()[0].samples
              if s.name.endswith("_total")}
    assert totals == {"a/b": 8.0, "c": 1024.0, "d/e/f": 1.0}
