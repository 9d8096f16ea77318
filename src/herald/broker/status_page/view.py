"""What the status page shows, gathered from the broker's memory into plain dicts.

One function per panel (broker, members, stores, journals, pipelines); the template
(`templates/status.html`) only lays them out. Everything is read on the event
loop from state the broker already holds: rendering the page never waits on etcd,
a store or a peer. Journals a token may not see are left out, as everywhere.
"""

from __future__ import annotations

import time
from typing import Any

from herald.auth import Claims
from herald.broker.authz import visible
from herald.broker.collector import etcd_session_state
from herald.broker.health import readiness
from herald.broker.service import Broker
from herald.broker.status_page.rates import TOTAL, RateHistory, sparkline_points
from herald.broker.status_page.reports import Reports
from herald.fragment.health import checker_of

__all__ = ["MAX_JOURNALS_SHOWN", "page"]

MAX_JOURNALS_SHOWN = 500


def page(broker: Broker, claims: Claims, history: RateHistory, reports: Reports) -> dict[str, Any]:
    """Every panel of the page, for the template."""
    now = time.time()
    journals, count = _journals(broker, claims, history, now)
    return {"broker": _broker(broker, history), "members": _members(broker), "stores": _stores(broker),
            "journals": journals, "journal_count": count,
            "pipelines": _pipelines(broker, reports, claims, now), "generated": time.strftime("%H:%M:%S UTC",
                                                                                         time.gmtime(now))}


def _broker(broker: Broker, history: RateHistory) -> dict[str, Any]:
    rates = history.rates(TOTAL)
    return {"member": str(broker.member_id), "endpoint": broker.endpoint,
            "mode": "cluster" if broker.is_cluster else "embedded", "session": etcd_session_state(broker),
            "revision": broker.keyspace.revision if broker.keyspace is not None else 0,
            "reasons": [{"check": r.check, "message": r.message} for r in readiness(broker)],
            "append_rate": rates.append_now, "read_rate": rates.read_now,
            "append_spark": sparkline_points(rates.append_bytes_per_s, 240, 36),
            "read_spark": sparkline_points(rates.read_bytes_per_s, 240, 36)}


def _members(broker: Broker) -> list[dict[str, Any]]:
    if broker.is_cluster:
        endpoints = {m: spec.endpoint for m, spec in broker.keyspace.members().items()}
    else:
        endpoints = {broker.member_id: broker.endpoint}
    counts = {m: [0, 0] for m in endpoints}
    for name in broker.keyspace.entries():
        route = broker.route(name)
        for i, member in enumerate(route.members):
            if member in counts:
                counts[member][0 if i == route.primary else 1] += 1
    return [{"zone": m.zone, "suffix": m.suffix, "endpoint": endpoints[m], "is_self": m == broker.member_id,
             "primary": counts[m][0], "replica": counts[m][1]} for m in sorted(endpoints)]


def _stores(broker: Broker) -> list[dict[str, Any]]:
    stores, using = {}, {}
    for journal in broker.journals.values():
        for store in journal.stores:
            stores[store.url] = store
            using[store.url] = using.get(store.url, 0) + 1
    rows = []
    for url, store in sorted(stores.items()):
        checker = checker_of(store)
        state = checker.statistics() if checker is not None else None
        health = ("unchecked" if state is None or not state.checked else
                  "healthy" if state.healthy else "unhealthy")
        rows.append({"url": url, "health": health, "journals": using[url],
                     "error": state.last_error if state is not None and health == "unhealthy" else "",
                     "failures": state.consecutive_failures if state is not None else 0})
    return rows


def _journals(broker: Broker, claims: Claims, history: RateHistory,
              now: float) -> tuple[list[dict[str, Any]], int]:
    """The first MAX_JOURNALS_SHOWN visible journals' rows, and how many are visible:
    only the rows shown are built (a broker may serve thousands)."""
    visible_entries = [(name, entry) for name, entry in sorted(broker.keyspace.entries().items())
                       if visible(claims, name, entry.spec.labels)]
    rows = []
    for name, entry in visible_entries[:MAX_JOURNALS_SHOWN]:
        route = broker.route(name)
        row = {"name": name, "labels": [f"{label.name}={label.value}" for label in entry.spec.labels
                                        if label.name != "name"],
               "members": [{"id": str(m), "primary": i == route.primary} for i, m in enumerate(route.members)],
               "served": False}
        journal = broker.journals.get(name)
        if journal is not None:
            row.update(_served(journal, history.rates(name), now))
        rows.append(row)
    return rows, len(visible_entries)


def _served(journal, rates, now: float) -> dict[str, Any]:
    local = persisted = local_bytes = persisted_bytes = 0
    oldest = newest = None
    for fragment in journal.index.fragments():
        size = fragment.end - fragment.begin
        if fragment.is_persisted:
            persisted, persisted_bytes = persisted + 1, persisted_bytes + size
            if fragment.mod_time:
                oldest = fragment.mod_time if oldest is None else min(oldest, fragment.mod_time)
                newest = fragment.mod_time if newest is None else max(newest, fragment.mod_time)
        else:
            local, local_bytes = local + 1, local_bytes + size
    return {"served": True, "write_head": journal.write_head, "role": "primary" if journal.is_primary else "replica",
            "local": local, "local_bytes": local_bytes, "persisted": persisted, "persisted_bytes": persisted_bytes,
            "oldest_age_s": now - oldest if oldest else None, "newest_age_s": now - newest if newest else None,
            "append_rate": rates.append_now, "read_rate": rates.read_now,
            "append_spark": sparkline_points(rates.append_bytes_per_s),
            "read_spark": sparkline_points(rates.read_bytes_per_s)}


def _pipelines(broker: Broker, reports: Reports, claims: Claims, now: float) -> list[dict[str, Any]]:
    def sees(name: str) -> bool:
        entry = broker.keyspace.get(name)
        return visible(claims, name, entry.spec.labels if entry is not None else None)

    rows = []
    for received in reports.current(now):
        report = received.report
        lags = [{"journal": j.journal, "read_through": j.read_through, "write_head": j.write_head,
                 "lag": max(0, j.write_head - j.read_through)} for j in report.journals
                if sees(j.journal)]
        if report.journals and not lags:
            continue  # every journal it reads is hidden from this token: so is the pipeline
        rows.append({"name": report.pipeline, "age_s": now - received.at_unix, "journals": lags,
                     "total_lag": sum(j["lag"] for j in lags), "dedupe": report.dedupe,
                     "batch_duration_s": report.batch_duration_s, "batches": report.batches})
    return rows
