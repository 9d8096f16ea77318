"""The broker's state as Prometheus gauges, read when ``/metrics`` is scraped.

Write heads, fragments waiting to be persisted, store health, the etcd session,
roles and replication pipelines are states, not events: counting them on the hot
path would cost every append for the benefit of one scrape every few seconds.
`BrokerCollector` walks the broker's in-memory state instead, on the event loop,
inside the scrape's handler (so it may read loop-owned objects without locks).

    REGISTRY.register(BrokerCollector(lambda: broker))   # once per process
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from herald.broker.service import Broker
from herald.fragment.health import checker_of

__all__ = ["BrokerCollector", "etcd_session_state"]

SESSION_STATES = ("embedded", "valid", "expired")


def etcd_session_state(broker: Broker) -> str:
    """``embedded`` (no etcd), ``valid`` (our lease is certainly ours) or ``expired``."""
    if not broker.is_cluster:
        return "embedded"
    return "valid" if broker.may_acknowledge() else "expired"


class BrokerCollector(Collector):
    """Gauges of the broker that ``current()`` returns (None: nothing to report)."""

    def __init__(self, current: Callable[[], Broker | None]) -> None:
        self._current = current

    def describe(self) -> list:
        return []  # no describe-time collection: the broker may not exist yet

    def collect(self) -> Iterator[GaugeMetricFamily]:
        broker = self._current()
        if broker is None:
            return
        yield from self._journals(broker)
        yield from self._stores(broker)
        yield from self._cluster(broker)
        yield from self._replication(broker)

    def _journals(self, broker: Broker) -> Iterator[GaugeMetricFamily]:
        heads = GaugeMetricFamily("herald_broker_write_head_bytes", "Journal write head", labels=["journal"])
        count = GaugeMetricFamily("herald_broker_fragments", "Fragments known to this broker: 'local' ones "
                                  "wait to be persisted", labels=["journal", "where"])
        size = GaugeMetricFamily("herald_broker_fragment_bytes", "Journal bytes in those fragments",
                                 labels=["journal", "where"])
        roles = {"primary": 0, "replica": 0}
        for name, journal in broker.journals.items():
            heads.add_metric([name], journal.write_head)
            tally = {"local": [0, 0], "persisted": [0, 0]}
            for fragment in journal.index.fragments():
                where = tally["persisted" if fragment.is_persisted else "local"]
                where[0] += 1
                where[1] += fragment.end - fragment.begin
            for where, (n, size_bytes) in tally.items():
                count.add_metric([name, where], n)
                size.add_metric([name, where], size_bytes)
            roles["primary" if journal.is_primary else "replica"] += 1
        served = GaugeMetricFamily("herald_broker_journals", "Journals this broker serves, by role",
                                   labels=["role"])
        for role, n in roles.items():
            served.add_metric([role], n)
        yield from (heads, count, size, served)

    def _stores(self, broker: Broker) -> Iterator[GaugeMetricFamily]:
        healthy = GaugeMetricFamily("herald_broker_store_healthy", "1 if the store passed its last health "
                                    "probe (absent until first checked)", labels=["store"])
        failures = GaugeMetricFamily("herald_broker_store_consecutive_failures",
                                     "Failed probes or uploads since the store was last healthy", labels=["store"])
        seen = set()
        for journal in broker.journals.values():
            for store in journal.stores:
                checker = checker_of(store)
                if store.url in seen or checker is None or not checker.statistics().checked:
                    continue
                seen.add(store.url)
                state = checker.statistics()
                healthy.add_metric([store.url], 1 if state.healthy else 0)
                failures.add_metric([store.url], state.consecutive_failures)
        yield from (healthy, failures)

    def _cluster(self, broker: Broker) -> Iterator[GaugeMetricFamily]:
        state = etcd_session_state(broker)
        session = GaugeMetricFamily("herald_broker_etcd_session", "1 for the broker's etcd session state: "
                                    "embedded, valid or expired", labels=["state"])
        for name in SESSION_STATES:
            session.add_metric([name], 1 if name == state else 0)
        yield session
        if broker.is_cluster and broker.keyspace is not None:
            remaining = broker.keyspace.lease_valid_until - asyncio.get_running_loop().time()  # scrapes run on the loop
            yield GaugeMetricFamily("herald_broker_etcd_lease_remaining_seconds",
                                    "How long the broker's lease is certainly valid without another refresh",
                                    value=max(0.0, remaining))
            yield GaugeMetricFamily("herald_broker_members", "Live brokers in the cluster",
                                    value=len(broker.keyspace.members()))
        if broker.keyspace is not None:
            yield GaugeMetricFamily("herald_broker_keyspace_revision", "Keyspace revision this broker has applied",
                                    value=broker.keyspace.revision)
        yield GaugeMetricFamily("herald_broker_scrape_time_seconds", "Unix time of this scrape", value=time.time())

    def _replication(self, broker: Broker) -> Iterator[GaugeMetricFamily]:
        synced = GaugeMetricFamily("herald_broker_replication_journals", "Journals this broker is primary of, "
                                   "per peer, by whether their pipeline is synced", labels=["peer", "synced"])
        tally: dict[tuple[str, str], int] = {}
        for journal in broker.journals.values():
            pipeline = journal.pipeline
            if pipeline is None:
                continue
            for peer in pipeline.peers:
                key = (peer, "true" if pipeline.synced else "false")
                tally[key] = tally.get(key, 0) + 1
        for (peer, is_synced), n in sorted(tally.items()):
            synced.add_metric([peer, is_synced], n)
        yield synced
