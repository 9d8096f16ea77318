"""The broker's Prometheus metrics, declared in one place (``/metrics`` serves them).

What the hot paths touch is here: counters and histograms bumped once per request,
group, round, upload or replication call — never per chunk or per byte. Those bumped
per request or per group commit (`LOOP`) are loop-local numbers with no lock
(`herald.broker.loop_metrics`), exported at scrape time: a request pays a dict
increment, a group commit one `count_group`. What is a *state* rather than an event (write heads, pending fragments,
store health, the etcd session) is read from the broker when Prometheus scrapes:
`herald.broker.collector`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from herald.broker.loop_metrics import JournalCounter, LoopCounter, LoopGauge, LoopHistogram

#: Seconds buckets from half a millisecond to ten seconds: an fsync, a round trip to
#: a peer, an upload of a fragment.
LATENCY_BUCKETS = (.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10)
#: Appends per group commit, and bytes per group commit (1 B .. 64 MiB).
GROUP_APPEND_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
GROUP_BYTE_BUCKETS = tuple(float(4 ** i) for i in range(14))


@dataclass(frozen=True)
class _Metrics:
    appended_bytes: JournalCounter
    append_groups: JournalCounter
    append_requests: LoopHistogram
    group_appends: LoopHistogram
    group_bytes: LoopHistogram
    sync_rounds: Counter
    sync_rounds_on_loop: Counter
    sync_round_seconds: LoopHistogram
    fdatasyncs: Counter
    syncfs: Counter
    streamed_appends: Counter
    persisted_fragments: Counter
    persisted_bytes: Counter
    upload_seconds: Histogram
    upload_failures: Counter
    read_bytes: Counter
    requests: LoopCounter
    active_reads: LoopGauge
    replication_seconds: Histogram
    replication_failures: Counter


METRICS = _Metrics(
    appended_bytes=JournalCounter("herald_broker_appended_bytes", "Bytes committed to journals"),
    append_groups=JournalCounter("herald_broker_append_groups", "Group commits (one fsync each)"),
    append_requests=LoopHistogram("herald_broker_append_seconds", "Append latency, body read to ack",
                                  LATENCY_BUCKETS),
    group_appends=LoopHistogram("herald_broker_append_group_appends", "Appends committed per group commit",
                                GROUP_APPEND_BUCKETS),
    group_bytes=LoopHistogram("herald_broker_append_group_bytes", "Bytes committed per group commit",
                              GROUP_BYTE_BUCKETS),
    sync_rounds=Counter("herald_broker_sync_rounds", "Broker-wide sync rounds (group commits of all journals)"),
    sync_rounds_on_loop=Counter("herald_broker_sync_rounds_on_loop",
                                "Sync rounds of a lone writer run on the event loop (herald.broker.lone_rounds)"),
    sync_round_seconds=LoopHistogram("herald_broker_sync_round_seconds",
                                     "Write + fdatasync latency of one sync round (every group in it)",
                                     LATENCY_BUCKETS),
    fdatasyncs=Counter("herald_broker_fdatasyncs", "fdatasyncs issued by group commits (data + commit line)"),
    syncfs=Counter("herald_broker_syncfs", "syncfs calls, each making a whole sync round durable at once"),
    streamed_appends=Counter("herald_broker_streamed_appends",
                             "Large appends written into the spool as their body arrived, by how they ended "
                             "(committed, failed, abandoned: the body never completed)", ["outcome"]),
    persisted_fragments=Counter("herald_broker_persisted_fragments", "Fragments persisted", ["journal"]),
    persisted_bytes=Counter("herald_broker_persisted_bytes", "Journal bytes persisted to stores (uncompressed)",
                            ["journal"]),
    upload_seconds=Histogram("herald_broker_fragment_upload_seconds",
                             "Compress + upload latency of one fragment, per attempt that succeeded",
                             buckets=LATENCY_BUCKETS),
    upload_failures=Counter("herald_broker_fragment_upload_failures", "Fragment uploads that failed (retried)",
                            ["store"]),
    read_bytes=Counter("herald_broker_read_bytes", "Bytes streamed to readers", ["journal"]),
    requests=LoopCounter("herald_broker_requests", "Requests answered, by operation and Gazette status",
                         ("op", "status")),
    active_reads=LoopGauge("herald_broker_active_reads", "Reads being streamed now (blocking reads included)"),
    replication_seconds=Histogram("herald_broker_replication_seconds",
                                  "Round trip of one replicated group or sync to a peer (the lag a peer "
                                  "adds to each append)", ["peer"], buckets=LATENCY_BUCKETS),
    replication_failures=Counter("herald_broker_replication_failures", "Replication calls to a peer that failed",
                                 ["peer"]),
)

#: The loop-local metrics, for `herald.broker.loop_metrics.LoopMetrics` to export.
LOOP = (METRICS.append_requests, METRICS.group_appends, METRICS.group_bytes, METRICS.sync_round_seconds,
        METRICS.requests, METRICS.active_reads)

#: Each journal's group and byte totals (`count_group`), looked up once per journal.
_GROUP_TOTALS: dict[str, tuple[list[float], list[float]]] = {}


def count_group(journal: str, appends: int, size: int) -> None:
    """A group commit of ``appends`` appends and ``size`` bytes to ``journal`` (loop
    thread only). With many journals a group holds one or two appends, so this is
    paid about once per append: two list items bumped and two histogram buckets,
    where prometheus_client's labelled counters took a lock each (3x the time)."""
    totals = _GROUP_TOTALS.get(journal)
    if totals is None:
        totals = _GROUP_TOTALS[journal] = (METRICS.append_groups.child(journal),
                                           METRICS.appended_bytes.child(journal))
    totals[0][0] += 1
    totals[1][0] += size
    METRICS.group_appends.observe(appends)
    METRICS.group_bytes.observe(size)


def count_request(op: str, status: str) -> None:
    """One request answered (loop thread only; a front end other than aiohttp's
    middleware calls this too)."""
    METRICS.requests.inc((op, status))


def request_op(method: str, path: str) -> str:
    """What a request is, for the request counter: ``append``, ``read``, ``control``,
    ``peer`` or ``meta`` (metrics, probes, the status page)."""
    if path.startswith("/v1/"):
        if path == "/v1/journals/append":
            return "append"
        return "peer" if path.startswith("/v1/replicate/") else "control"
    if path in META_PATHS or path.startswith(STATIC_PREFIX):
        return "meta"
    if method == "PUT":
        return "append"
    return "read" if method in ("GET", "HEAD") else "other"


#: Paths served before the gateway's ``/{journal}`` (so journals of these exact names
#: cannot be read over the gateway: docs/operations.md says so).
META_PATHS = frozenset({"/", "/metrics", "/debug/metrics", "/healthz", "/readyz", "/v1/openapi.json"})
#: The status page's static files: ``~`` is outside the journal-name charset, so no
#: journal is ever shadowed by them.
STATIC_PREFIX = "/~status/"
