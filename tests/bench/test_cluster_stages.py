"""The cluster benchmark's stage figures (`bench.cluster._Stages`), read from real
brokers' histograms around a few appends: one append per group when they come one
at a time, and a peer round trip and peers' fdatasyncs only where there are peers. Timings are never
asserted, only that each stage was seen."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

try:
    import bench  # noqa: F401
except ImportError:  # pytest not started from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cluster import _await_append, _Stages
from bench.servers import apply, bench_spec, herald_cluster

APPENDS = 5


def test_stages_see_each_group_and_a_peer_round_trip_only_with_peers(tmp_path):
    with herald_cluster(tmp_path, 3, 3) as cluster, httpx.Client(timeout=10.0) as http:
        for replication in (1, 3):
            journal = f"bench/stages-{replication}"
            apply(cluster.brokers[0].url, bench_spec(journal, replication=replication))
            primary = cluster.primary_of(journal)
            _await_append(primary.url, journal, 60.0)  # before the run: not counted
            stages = _Stages(cluster, primary)
            for i in range(APPENDS):
                assert http.put(f"{primary.url}/{journal}", content=b'{"n":%d}\n' % i).status_code == 204
            figures = stages.since()
            assert figures["appends_per_group"] == 1.0, figures  # one writer, one append at a time
            assert figures["broker_append_ms"] > 0 and figures["sync_round_ms"] > 0, figures
            assert (figures["peer_round_trip_ms"] > 0) == (replication == 3), figures
            assert figures["primary_fdatasyncs_per_group"] > 0, figures  # data and line, or the log's
            assert (figures["peer_fdatasyncs_per_group"] > 0) == (replication == 3), figures
