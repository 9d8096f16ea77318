"""The synthetic event stream of Segment's blog: mobile clients that retry.

Events look like the seed's (``messageId``, ``anonymousId``, ``timestamp``,
``type``). A fraction ``dup_rate`` of them is sent a second time, later, as a
client that missed the API's response would: the same ``messageId`` and the same
body (so the same client ``timestamp``), but a new Herald UUID — to the broker a
retry is a new message; only the pipeline can tell it is a duplicate.

`plan_events` is the pure part (a seeded, reproducible send order with
*virtual* send times); `generate` publishes that plan through a `Publisher`
keyed by ``messageId`` (modulo or rendezvous mapping, so every copy of an event
lands in the same journal, as Segment partitions Kafka by messageId).

    with BrokerClient(url) as client:
        stats = generate(client, "prefix=events/", GeneratorSettings(count=10_000))
"""

from __future__ import annotations

import heapq
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import orjson

from herald.client import AppendService, BrokerClient, WatchedList
from herald.client.publisher import Publisher
from herald.message import MAPPINGS
from herald.protocol.errors import ValidationError

__all__ = ["GeneratorSettings", "GeneratorStats", "PlannedEvent", "generate", "plan_events"]

log = logging.getLogger(__name__)

EVENT_TYPES = ("page", "track", "identify", "screen")
NOMINAL_RATE = 1000.0  # events/s of virtual time when no --rate is given.
LIST_READY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class GeneratorSettings:
    """What to generate. ``rate`` None sends as fast as possible (virtual time still
    runs at NOMINAL_RATE, to lay out timestamps and retry delays); retries come
    ``retry_delay_s`` × U(0.5, 1.5) after their original."""

    count: int
    rate: float | None = None
    dup_rate: float = 0.006
    retry_delay_s: float = 2.0
    mapping: str = "modulo"
    seed: int | None = None
    users: int = 0  # anonymousIds in the pool (0 = count // 20 + 1).

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValidationError("count", f"must be >= 0 ({self.count})")
        if self.rate is not None and self.rate <= 0:
            raise ValidationError("rate", f"must be > 0 ({self.rate})")
        if not 0 <= self.dup_rate <= 1:
            raise ValidationError("dup_rate", f"must be in [0, 1] ({self.dup_rate})")
        if self.retry_delay_s < 0:
            raise ValidationError("retry_delay", f"must be >= 0 ({self.retry_delay_s})")
        if self.mapping not in MAPPINGS:
            raise ValidationError("mapping", f"must be one of {', '.join(MAPPINGS)} ({self.mapping!r})")


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """One send: at virtual second ``at_s`` after the start; ``is_retry`` marks a
    client's second send of an earlier event (same body)."""

    at_s: float
    message_id: str
    body: bytes
    is_retry: bool


@dataclass(frozen=True, slots=True)
class GeneratorStats:
    events: int
    retries: int
    elapsed_s: float

    @property
    def events_per_s(self) -> float:
        return (self.events + self.retries) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "events_per_s": round(self.events_per_s, 1)}


def _iso_ms(unix_ms: int) -> str:
    dt = datetime.fromtimestamp(unix_ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{unix_ms % 1000:03d}Z"


def _hex(rnd: random.Random, bits: int) -> str:
    return f"{rnd.getrandbits(bits):0{bits // 4}x}"


def _uuid4(rnd: random.Random) -> str:
    h = _hex(rnd, 128)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def plan_events(settings: GeneratorSettings, start_unix_ms: int) -> Iterator[PlannedEvent]:
    """The send order, pure and reproducible for a seed: originals at virtual times
    ``i / rate`` with ``timestamp`` = start + that time; each retry is emitted
    once virtual time passes its due time (retries still due at the end follow)."""
    rnd = random.Random(settings.seed)
    rate = settings.rate or NOMINAL_RATE
    users = [_uuid4(rnd) for _ in range(settings.users or settings.count // 20 + 1)]
    due: list[tuple[float, int, PlannedEvent]] = []
    for i in range(settings.count):
        at_s = i / rate
        while due and due[0][0] <= at_s:
            yield heapq.heappop(due)[2]
        message_id = "ajs-" + _hex(rnd, 128)
        body = orjson.dumps({"messageId": message_id, "anonymousId": rnd.choice(users),
                             "timestamp": _iso_ms(start_unix_ms + int(at_s * 1000)),
                             "type": rnd.choice(EVENT_TYPES)})
        yield PlannedEvent(at_s, message_id, body, False)
        if rnd.random() < settings.dup_rate:
            retry_at = at_s + settings.retry_delay_s * rnd.uniform(0.5, 1.5)
            heapq.heappush(due, (retry_at, i, PlannedEvent(retry_at, message_id, body, True)))
    while due:
        yield heapq.heappop(due)[2]


def generate(client: BrokerClient, selector: str, settings: GeneratorSettings,
             progress: Callable[[int], None] | None = None) -> GeneratorStats:
    """Publish the plan to the journals ``selector`` matches; blocks until every
    event is durable. Paced by ``settings.rate`` (else as fast as possible)."""
    started = time.monotonic()
    events = retries = 0
    with WatchedList(client, selector) as watched, AppendService(client) as service:
        if not watched.wait_ready(LIST_READY_TIMEOUT_S):
            raise ValidationError("output", f"no journal list for selector {selector!r}")
        publisher = Publisher(service, watched, settings.mapping, rnd=random.Random(settings.seed))
        futures = []
        for ev in plan_events(settings, int(time.time() * 1000)):
            if settings.rate is not None:
                _pace(started + ev.at_s)
            futures.append(publisher.publish_committed(ev.message_id.encode(), ev.body))
            retries += ev.is_retry
            events += not ev.is_retry
            if progress is not None and (events + retries) % 10_000 == 0:
                progress(events + retries)
        publisher.flush()
    _raise_failed(futures)
    return GeneratorStats(events, retries, time.monotonic() - started)


def _pace(deadline: float) -> None:
    """Rate limiting (not synchronisation): wait until this send is due."""
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _raise_failed(futures: list) -> None:
    for fut in {id(f): f for f in futures}.values():
        exc = fut.exception()
        if exc is not None:
            raise exc
