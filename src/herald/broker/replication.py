"""Replication: a primary's pipeline to its peers, and the peers' HTTP endpoints.

Protocol (broker to broker, JSON errors as everywhere):

- ``POST /v1/replicate/sync?journal=J`` ``{end, registers, fragment_begin}``: the
  peer rolls forward to ``end`` if it is behind and answers ``{begin, end, registers}``.
  An answer ahead of the primary makes the primary roll forward to it: the most
  advanced replica wins, so no byte any replica committed is dropped.
- ``POST /v1/replicate/stream?journal=J``: the primary's groups, one frame each, on
  one long request (`herald.broker.peer_stream`): the peer writes, fdatasyncs and
  commits each in turn, and answers a line with the SHA1 of its fragment; the
  primary commits only when every peer's SHA1 equals its own [I-APPEND-3].
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

import aiohttp
import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from herald.broker import wire
from herald.broker.authz import authorize_journal
from herald.broker.backoff import RetryPacer
from herald.broker.endpoints import Endpoint, Param, add_endpoints
from herald.broker.group import MAX_GROUP_BYTES
from herald.broker.metrics import METRICS
from herald.broker.peer_stream import PeerStream, answer_line, error_line, frame_head, read_frame
from herald.broker.preconditions import catch_up_to_index
from herald.broker.proxy import ROUTE_REVISION_HEADER, route_revision
from herald.protocol.errors import HeraldError, Status, ValidationError, with_field_prefix
from herald.protocol.labels import LabelSet

log = logging.getLogger(__name__)

REPLICATION_TIMEOUT_S = 10.0
PRIMARY_HEADER = "X-Herald-Primary"
MAX_OFFSET = (1 << 63) - 1


class Pipeline:
    """A primary's replication to one journal's peers (owned by its append task)."""

    def __init__(self, journal: str, peers: list[str], session: aiohttp.ClientSession,
                 advertise: Callable[[], Awaitable[None]], primary: str = "",
                 credentials: Callable[[], dict[str, str]] = dict, revision: Callable[[], int] = lambda: 0,
                 tls: ssl.SSLContext | None = None):
        self.journal = journal
        self.tls = tls  # for https peers' streams (None: the default context)
        self.revision = revision  # our keyspace revision: a peer behind it catches up before judging us
        self.credentials = credentials  # the primary's own token for its peers
        self.primary = primary  # our member id: peers refuse a primary their route disagrees with
        self.peers = peers
        self.session = session
        self.advertise = advertise
        self.synced = False
        self.pacer = RetryPacer()  # spaces syncs to peers that keep failing
        self._streams: dict[str, PeerStream] = {}

    async def sync(self, journal) -> None:
        """Bring every peer to the primary's end (or the primary to the furthest peer's).

        Afterwards every replica's spool begins and ends where the primary's does, so
        their fragments are identical and persist under the same names. After a
        failure, attempts before the pacer's next slot fail at once (no network).
        """
        now = asyncio.get_running_loop().time()
        if wait_s := self.pacer.wait_s(now):
            raise HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                              f"replicas of {self.journal} are unreachable; next try in {wait_s:.1f} s")
        self.close()  # groups before the sync never follow it on a peer's stream
        try:
            await self._sync(journal)
        except HeraldError as err:
            if warning := self.pacer.failed(asyncio.get_running_loop().time()):
                log.warning("replication failing (%s): %s", warning, err.message,
                            extra={"journal": self.journal, "peers": ", ".join(self.peers)})
            raise
        self.pacer.succeeded()

    async def _sync(self, journal) -> None:
        answers = await self._scatter_sync(journal)
        furthest = max(answers, key=lambda a: a[1])
        rolled_forward = furthest[1] > journal.write_head
        if rolled_forward:
            journal.roll_forward(furthest[1], furthest[2])
            answers = await self._scatter_sync(journal)
        # Then to persisted bytes past every live replica (after them: a peer ahead
        # wins first, with its registers). INDEX_HAS_GREATER_OFFSET, herald.broker.preconditions.
        if catch_up_to_index(journal, syncing=True):
            answers = await self._scatter_sync(journal)
        elif not rolled_forward and any(a[:2] != journal.spool_position()[:2] for a in answers):
            # A peer lacks bytes only our spool holds (it restarted, or just joined), or
            # cut its fragment elsewhere: roll, so our bytes persist now, the peer fills
            # its hole from the store, and all start the next fragment together.
            journal.roll()
            answers = await self._scatter_sync(journal)
        if any(a[:2] != journal.spool_position()[:2] for a in answers):
            raise HeraldError(Status.PROPOSAL_MISMATCH, "replicas disagree after sync; retrying")
        self.synced = True
        await self.advertise()
        log.info("pipeline synced", extra={"journal": self.journal, "write_head": journal.write_head,
                                           "peers": ", ".join(self.peers)})

    async def _scatter_sync(self, journal) -> list[tuple[int, int, LabelSet]]:
        begin, end, registers = journal.spool_position()
        body = {"end": end, "registers": registers.to_list(), "fragment_begin": begin}
        return await asyncio.gather(*(self._sync_peer(peer, body) for peer in self.peers))

    async def _sync_peer(self, peer: str, body: dict) -> tuple[int, int, LabelSet]:
        doc = await self._post(peer, "/v1/replicate/sync", {"journal": self.journal}, orjson.dumps(body))
        return doc["begin"], doc["end"], LabelSet.from_list(doc["registers"])

    def replicate(self, fragment_begin: int, begin: int, contents: list[bytes],
                  registers: LabelSet) -> asyncio.Future[list[str]]:
        """Send one group (its bodies) to every peer now, on each one's stream after
        the groups sent before it; the future is their fragment SHA1s, or the first
        failure (a peer's, or none within `REPLICATION_TIMEOUT_S`)."""
        head = frame_head(begin, fragment_begin, sum(map(len, contents)), registers)
        frame = b"".join([head, *contents])  # one chunk, one send per peer
        credentials = self.credentials()
        answers = [self._stream(peer, credentials).send(frame) for peer in self.peers]
        return all_answers(answers, REPLICATION_TIMEOUT_S, self._timed_out)

    def _timed_out(self) -> HeraldError:
        self.synced = False
        self.close()
        return HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                           f"replicas of {self.journal} did not answer within {REPLICATION_TIMEOUT_S:g} s")

    def _stream(self, peer: str, credentials: dict[str, str]) -> PeerStream:
        """The open stream to ``peer``, or a new one (also when our peer token was
        renewed: a stream is authenticated once, at open)."""
        stream = self._streams.get(peer)
        if stream is None or stream.closed or stream.credentials != credentials:
            if stream is not None:
                stream.close(graceful=True)  # answers every frame it was sent, then ends
            headers = {**credentials, PRIMARY_HEADER: self.primary, ROUTE_REVISION_HEADER: str(self.revision())}
            stream = self._streams[peer] = PeerStream(peer, self.journal, headers, self._stream_failed, self.tls)
            stream.credentials = credentials
        return stream

    def _stream_failed(self, _err: HeraldError) -> None:
        self.synced = False  # re-sync before the next group

    def close(self) -> None:
        """Drop every stream (a re-sync, a new pipeline, a demotion, closing): frames
        not yet answered fail."""
        streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            stream.close()

    async def _post(self, peer: str, path: str, params: dict, body: bytes,
                    headers: dict | None = None) -> dict:
        headers = {**(headers or {}), **self.credentials(), PRIMARY_HEADER: self.primary,
                   ROUTE_REVISION_HEADER: str(self.revision())}
        started = time.perf_counter()
        try:
            async with self.session.post(f"{peer}{path}", params=params, data=body, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=REPLICATION_TIMEOUT_S)) as resp:
                doc = orjson.loads(await resp.read())
                if resp.status != 200:
                    METRICS.replication_failures.labels(peer).inc()
                    raise HeraldError.from_dict(doc)
                METRICS.replication_seconds.labels(peer).observe(time.perf_counter() - started)
                return doc
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError) as err:
            METRICS.replication_failures.labels(peer).inc()
            self.synced = False
            raise HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                              f"replica {peer} of {self.journal} failed: {err or type(err).__name__}") from None


def all_answers(answers: list[asyncio.Future[str]], timeout_s: float,
                on_timeout: Callable[[], HeraldError]) -> asyncio.Future[list[str]]:
    """One future for every peer's answer: their results in order, or the first
    failure, or ``on_timeout()``'s error after ``timeout_s``. What
    ``wait_for(gather(...))`` did, without its task, its inner future and their
    callbacks: this is paid once per replicated group."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[list[str]] = loop.create_future()
    left = len(answers)

    def one_done(answer: asyncio.Future[str]) -> None:
        nonlocal left
        if result.done():
            return
        error = (HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS, "a replica's answer was cancelled")
                 if answer.cancelled() else answer.exception())
        left -= 1
        if error is not None:
            result.set_exception(error)
        elif left == 0:
            result.set_result([done.result() for done in answers])
        else:
            return
        timer.cancel()

    def timed_out() -> None:
        if not result.done():
            result.set_exception(on_timeout())

    timer = loop.call_later(timeout_s, timed_out)
    for answer in answers:
        answer.add_done_callback(one_done)
    if not answers:
        timer.cancel()
        result.set_result([])
    return result


# -- the peer side ---------------------------------------------------------------------


async def _replica(request: web.Request):
    """The local replica a primary writes to — only if our route agrees it is primary.

    A deposed primary (its lease expired, e.g. partitioned from etcd) may still send
    writes; refusing them with WRONG_ROUTE keeps two primaries from ever both
    acknowledging appends through the same peers. A primary newer than our view of
    the keyspace (it was just assigned, and so were we) is judged only once we have
    applied the revision it sends, as a proxied request is: otherwise a new
    journal's first append failed while its peers were still a watch event behind.
    """
    broker = request.app["broker"]
    name = request.query.get("journal", "")
    authorize_journal(request, name)
    try:
        return _agreed_replica(broker, name, request.headers.get(PRIMARY_HEADER, ""))
    except HeraldError:
        revision = route_revision(request)
        if revision <= broker.keyspace.revision:
            raise
    await broker.catch_up_to_route(name, False, revision)
    return _agreed_replica(broker, name, request.headers.get(PRIMARY_HEADER, ""))


def _agreed_replica(broker, name: str, claimed_primary: str):
    journal = broker.journals.get(name)
    if journal is None:
        raise HeraldError(Status.NOT_JOURNAL_BROKER, f"this broker is not a replica of {name}", "journal")
    primary = broker.route(name).primary_member
    if str(primary) != claimed_primary:
        raise HeraldError(Status.WRONG_ROUTE,
                          f"{claimed_primary} is not the primary of {name} here (route says {primary})", "journal")
    return journal


def _offset(raw: object, key: str) -> int:
    """A byte offset a peer sent: an integer in [0, 2^63). Checked before any journal
    state is touched, so a hostile value can never reach the spool."""
    if isinstance(raw, str):
        try:
            raw = int(raw)
        except ValueError:
            raise ValidationError(key, f"an integer offset is required, not {raw!r}") from None
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= MAX_OFFSET:
        raise ValidationError(key, f"must be an integer offset in [0, 2^63), not {raw!r}")
    return raw


def _sync_request(raw: bytes) -> tuple[int, LabelSet, int]:
    """The ``(end, registers, fragment_begin)`` of a sync body, each field checked."""
    body = wire.json_object(raw)
    end, begin = _offset(body.get("end"), "end"), _offset(body.get("fragment_begin"), "fragment_begin")
    if begin > end:
        raise ValidationError("fragment_begin", f"must be ≤ end ({begin} > {end})")
    registers = body.get("registers")
    if not isinstance(registers, list):
        raise ValidationError("registers", "must be a list of labels")
    with with_field_prefix("registers"):
        return end, LabelSet.from_list(registers), begin


async def handle_sync(request: web.Request) -> web.Response:
    """Peers only: roll this replica forward to the primary's end, and say where it is."""
    end, registers, fragment_begin = _sync_request(await request.read())
    journal = await _replica(request)
    begin, end, registers = await journal.sync_to(end, registers, fragment_begin)
    return web.json_response({"begin": begin, "end": end, "registers": registers.to_list()}, dumps=_dumps)


async def handle_stream(request: web.Request) -> web.StreamResponse:
    """Peers only: apply a primary's groups, streamed as frames, in order; one answer line each."""
    broker = request.app["broker"]
    journal = await _replica(request)
    name, primary = journal.spec.name, request.headers.get(PRIMARY_HEADER, "")
    if (deadline := request.get("body_deadline")) is not None:
        deadline.cancel()  # an open-ended body; the primary bounds each group's answer
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    stop = asyncio.ensure_future(_drop_when_stopping(broker, request))
    judged_at = broker.keyspace.revision
    limit = MAX_GROUP_BYTES + broker.settings.max_append_bytes
    try:
        while frame := await read_frame(request.content, lambda head: _frame_fields(head, limit)):
            if broker.keyspace.revision != judged_at:  # the route may have moved: judge the primary again
                judged_at = broker.keyspace.revision
                journal = _agreed_replica(broker, name, primary)
            fragment_begin, begin, registers, content = frame
            digest = await journal.apply_replicated(fragment_begin, begin, content, registers)
            await response.write(answer_line(digest))
    except HeraldError as err:
        with contextlib.suppress(ConnectionError):
            await response.write(error_line(err))
    except (ConnectionError, HttpProcessingError):
        pass  # the primary dropped the stream: its unanswered groups fail there
    finally:
        stop.cancel()
    return response


async def _drop_when_stopping(broker, request: web.Request) -> None:
    """A stream never ends by itself: end it when the broker stops (shutdown is bounded)."""
    await broker.stopping.wait()
    if request.transport is not None:
        request.transport.close()


def _frame_fields(head: dict, limit: int) -> tuple[int, int, LabelSet, int]:
    """``(fragment_begin, begin, registers, length)`` of a frame header, each checked."""
    fragment_begin, begin, registers = _group_place(head.get("fragment_begin"), head.get("begin"),
                                                    head.get("registers", ""))
    length = _offset(head.get("length"), "length")
    if length > limit:
        raise ValidationError("length", f"a group is at most {limit} bytes, not {length}")
    _check_end(begin, length)
    return fragment_begin, begin, registers, length


def _group_place(raw_fragment_begin: object, raw_begin: object,
                 raw_registers: object) -> tuple[int, int, LabelSet]:
    """Where a replicated group goes and the registers after it, as a stream frame's
    head carries them, each checked."""
    fragment_begin, begin = _offset(raw_fragment_begin, "fragment_begin"), _offset(raw_begin, "begin")
    if fragment_begin > begin:
        raise ValidationError("fragment_begin", f"must be ≤ begin ({fragment_begin} > {begin})")
    if not isinstance(raw_registers, str):
        raise ValidationError("registers", "must be a string of labels")
    return fragment_begin, begin, _registers(raw_registers)


@functools.lru_cache(maxsize=256)
def _registers(raw: str) -> LabelSet:
    """A frame's registers, parsed and checked: a stream's frames mostly repeat the
    same (often empty) registers, so each text is parsed once (LabelSet is immutable)."""
    try:
        return LabelSet.parse(raw)
    except ValidationError as err:
        raise ValidationError("registers", err.message) from None


def _check_end(begin: int, length: int) -> None:
    if begin + length > MAX_OFFSET:
        raise ValidationError("begin", "the append would pass the largest offset")


def _dumps(doc) -> str:
    return orjson.dumps(doc).decode()


_PEER_QUERY = (Param("journal", "The replicated journal.", required=True),)
_PEER_HEADERS = (Param(PRIMARY_HEADER, "The sending primary's member id (`zone#suffix`).", required=True),)
ENDPOINTS = (
    Endpoint("POST", "/v1/replicate/sync", handle_sync, "peers", wire.SyncRequest, wire.SyncResponse,
             query=_PEER_QUERY, headers=_PEER_HEADERS),
    Endpoint("POST", "/v1/replicate/stream", handle_stream, "peers", "application/octet-stream",
             "application/x-ndjson", query=_PEER_QUERY, headers=_PEER_HEADERS),
)


def add_routes(app: web.Application) -> None:
    add_endpoints(app, ENDPOINTS)
