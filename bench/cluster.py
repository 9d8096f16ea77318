"""Benchmark 1b — Replication and fail-over on a 3-broker etcd cluster.

Replication 3 vs 1: the same 1 KiB × 32-writer wrk load against each journal's
primary (so no proxy hop), throughput and p99; the single-replica journal is the
reference. Fail-over: ``kill -9`` of a 2-replica journal's primary, then the time
until an append through a surviving broker succeeds again (a client retrying
every 20 ms), with the member lease as the input that bounds it. Two replicas on
three brokers, so the spare can fill the peerset: a 3-replica journal on three
brokers rightly refuses appends (INSUFFICIENT_JOURNAL_BROKERS) until the killed
broker is back, which would measure the restart, not the fail-over.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

import httpx

from bench.append import UNITS, size_name
from bench.loadgen import LoadResult, run_wrk
from bench.references import ndjson_body
from bench.runner import Config, Report, measure_interleaved, remove_tree
from bench.servers import Cluster, apply, bench_spec, herald_cluster
from herald.testing import BrokerProcess

__all__ = ["run"]

LEASE_S = 3
APPEND_BYTES = 1 << 10
WRITERS = 32
FAILOVER_DEADLINE_S = 60.0
RETRY_EVERY_S = 0.02
FAILOVER_REPLICATION = 2  # of 3 brokers: a spare takes the killed primary's place


def run(config: Config) -> Report:
    report = Report("cluster", config, inputs={
        "brokers": 3, "zones": 3, "etcd_lease_s": LEASE_S, "append_bytes": APPEND_BYTES,
        "writers": WRITERS, "failover_retry_every_s": RETRY_EVERY_S, "failover_replication": FAILOVER_REPLICATION})
    scratch = config.scratch("cluster")
    try:
        with herald_cluster(scratch, 3, LEASE_S) as cluster:
            _replication(report, config, cluster)
            _failover(report, config, cluster)
    finally:
        remove_tree(scratch)
    case = f"{size_name(APPEND_BYTES)} x{WRITERS}"
    report.headline(f"replication 3 vs 1, {case}: appends/s", ("herald replication=3", case, "appends_per_s"),
                    ("herald replication=1", case, "appends_per_s"))
    report.headline(f"replication 3 vs 1, {case}: p99 latency", ("herald replication=3", case, "p99_ms"),
                    ("herald replication=1", case, "p99_ms"))
    report.headline("fail-over after kill -9 of the primary: seconds vs the member lease",
                    ("herald", "kill -9 primary", "failover_s"), ("etcd lease", "kill -9 primary", "failover_s"))
    return report


def _replication(report: Report, config: Config, cluster: Cluster) -> None:
    body = ndjson_body(APPEND_BYTES)
    systems = {}
    for replication in (1, 3):
        journal = f"bench/replicated-{replication}"
        apply(cluster.brokers[0].url, bench_spec(journal, replication=replication))
        primary = cluster.primary_of(journal)
        _await_append(primary.url, journal, FAILOVER_DEADLINE_S)  # warm: pipeline synced
        systems[f"herald replication={replication}"] = (
            lambda url=primary.url, path="/" + journal, primary=primary:
            _with_broker_cpu(cluster, primary, lambda: run_wrk(url, [path], body, WRITERS, config.duration_s)))
    case = f"{size_name(APPEND_BYTES)} x{WRITERS}"
    for system, samples in measure_interleaved(config, systems).items():
        report.add(system, case, samples, {**UNITS, **{metric: "us" for metric in CPU_METRICS}, **STAGE_UNITS})


#: CPU per append: every broker's, the primary's, and the busiest peer's.
CPU_METRICS = ("broker_cpu_us_per_append", "primary_cpu_us_per_append", "peer_cpu_us_per_append")
#: Where an append's time goes, from the brokers' own histograms over the run (means):
#: appends per group (half the writers: they split into two cohorts), the primary's
#: append latency from body read to ack (the rest of wrk's is its HTTP and the
#: load generator), the slowest peer's round trip per group (0 at replication 1),
#: and the sync round (write + fdatasyncs) of that peer, or of the primary at
#: replication 1: the same disk work on the critical path of each.
#: And the fdatasyncs each group cost the primary and the busiest peer (data and
#: commit line each, in place; one for a group the commit log carries): on this
#: virtual disk one that writes dirty pages back costs 130-190 us of CPU
#: (a clean one ~25), so replication 3's six a group against replication 1's two
#: are most of its extra CPU per append.
STAGE_UNITS = {"appends_per_group": "appends", "broker_append_ms": "ms", "peer_round_trip_ms": "ms",
               "sync_round_ms": "ms", "primary_fdatasyncs_per_group": "fdatasyncs",
               "peer_fdatasyncs_per_group": "fdatasyncs"}


def _with_broker_cpu(cluster: Cluster, primary: BrokerProcess, run: Callable[[], LoadResult]) -> dict[str, float]:
    """``run()``'s figures and the CPU the brokers used meanwhile (user + system,
    from /proc), per append: replication's cost summed over primary and peers, and
    apart (the primary's, and the busiest peer's), to show where it goes."""
    pids = {broker.proc.pid: broker is primary for broker in cluster.brokers if broker.proc is not None}
    stages = _Stages(cluster, primary)  # its scrapes outside the CPU measured
    before = {pid: _cpu_s(pid) for pid in pids}
    result = run()
    used = {pid: _cpu_s(pid) - before[pid] for pid in pids}
    per_append = 1e6 / result.requests if result.requests else 0.0
    peers = [seconds for pid, seconds in used.items() if not pids[pid]]
    return {**result.metrics(APPEND_BYTES),
            "broker_cpu_us_per_append": sum(used.values()) * per_append,
            "primary_cpu_us_per_append": sum(s for pid, s in used.items() if pids[pid]) * per_append,
            "peer_cpu_us_per_append": max(peers, default=0.0) * per_append, **stages.since()}


#: The histogram families `_Stages` reads: (name, its labels if any) -> (sum, count).
_FAMILY = re.compile(r"^herald_broker_(append_seconds|append_group_appends|replication_seconds|sync_round_seconds)"
                     r"_(sum|count)(\{[^}]*\})? ([0-9.e+-]+)$", re.MULTILINE)
#: The fdatasync counter `_Stages` reads too (group commits' syncs and the commit log's).
_SYNCS = re.compile(r"^herald_broker_fdatasyncs_total ([0-9.e+-]+)$", re.MULTILINE)


class _Stages:
    """The brokers' histograms of one run, read from ``/metrics`` before and after
    (see `STAGE_UNITS`): the run's own sums and counts, not the brokers' lifetime's."""

    def __init__(self, cluster: Cluster, primary: BrokerProcess):
        self.primary = primary
        self.peers = [broker for broker in cluster.brokers if broker is not primary and broker.proc is not None]
        self.before = self._read()

    def _read(self) -> dict[tuple[str, str, str], float]:
        values = {}
        for broker in (self.primary, *self.peers):
            text = httpx.get(f"{broker.url}/metrics", timeout=10.0).text
            for family, part, labels, value in _FAMILY.findall(text):
                key = (broker.url, family + (labels or ""), part)
                values[key] = values.get(key, 0.0) + float(value)
            values[(broker.url, "fdatasyncs", "count")] = sum(map(float, _SYNCS.findall(text)))
        return values

    def since(self) -> dict[str, float]:
        after, url = self._read(), self.primary.url
        trips = {peer.url: self._mean(after, url, f'replication_seconds{{peer="{peer.url}"}}', 1e3)
                 for peer in self.peers}
        slowest = max(trips, key=trips.__getitem__, default=None)
        syncing = slowest if slowest and trips[slowest] else url  # replication 1: the primary syncs
        groups = self._delta(after, url, "append_group_appends", "count")
        syncs = {broker.url: self._delta(after, broker.url, "fdatasyncs", "count") / groups if groups else 0.0
                 for broker in (self.primary, *self.peers)}
        return {"appends_per_group": self._mean(after, url, "append_group_appends"),
                "broker_append_ms": self._mean(after, url, "append_seconds", 1e3),
                "peer_round_trip_ms": trips[slowest] if slowest else 0.0,
                "sync_round_ms": self._mean(after, syncing, "sync_round_seconds", 1e3),
                "primary_fdatasyncs_per_group": syncs[url],
                "peer_fdatasyncs_per_group": max((syncs[peer.url] for peer in self.peers), default=0.0)}

    def _delta(self, after: dict[tuple[str, str, str], float], url: str, family: str, part: str) -> float:
        """How much one broker's ``family`` ``part`` grew over the run."""
        return after.get((url, family, part), 0.0) - self.before.get((url, family, part), 0.0)

    def _mean(self, after: dict[tuple[str, str, str], float], url: str, family: str, scale: float = 1.0) -> float:
        """The mean of one broker's histogram ``family`` over the run (0 if empty)."""
        count, total = self._delta(after, url, family, "count"), self._delta(after, url, family, "sum")
        return total / count * scale if count else 0.0


def _cpu_s(pid: int) -> float:
    """A process's CPU seconds so far (every thread), or 0 where /proc lacks it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _await_append(url: str, journal: str, deadline_s: float) -> float:
    """Append until one succeeds through ``url``; the seconds it took (bounded)."""
    start = time.monotonic()
    with httpx.Client(timeout=2.0) as http:
        while time.monotonic() - start < deadline_s:
            try:
                if http.put(f"{url}/{journal}", content=b'{"probe":1}\n').status_code == 204:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            time.sleep(RETRY_EVERY_S)  # wait-ok: the retry cadence is what is measured.
    raise TimeoutError(f"no append to {journal} succeeded within {deadline_s:.0f} s")


def _failover(report: Report, config: Config, cluster: Cluster) -> None:
    times = []
    for i in range(config.runs):
        journal = f"bench/failover-{i}"
        apply(cluster.brokers[0].url, bench_spec(journal, replication=FAILOVER_REPLICATION))
        primary = cluster.primary_of(journal)
        _await_append(primary.url, journal, FAILOVER_DEADLINE_S)
        survivor = next(b for b in cluster.brokers if b is not primary)
        killed_at = time.monotonic()
        primary.kill()
        _await_append(survivor.url, journal, FAILOVER_DEADLINE_S)
        times.append(time.monotonic() - killed_at)
        primary.start()  # back as a member (a fresh lease) for the next run
    report.add("herald", "kill -9 primary", {"failover_s": times}, {"failover_s": "s"})
    report.add("etcd lease", "kill -9 primary", {"failover_s": [float(LEASE_S)] * len(times)},
               {"failover_s": "s"})
    report.note(f"Fail-over is bounded below by the member lease ({LEASE_S} s here; Herald's default is 20 s): "
                "a killed broker's journals move only once etcd expires its lease.")
