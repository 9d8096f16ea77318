"""The cluster keyspace: specs, members and assignments in etcd (aetcd; the watch in `etcd_watch`).

A broker keeps an in-memory mirror of everything under ``--etcd.prefix``: loaded
with one range read, then kept current by a watch from the next revision. Views
(specs, members, a journal's assignments) are read from the mirror; writes are
etcd transactions guarded by mod revisions, so two writers never both win.
Members announce under a lease; assignment keys live under their member's lease,
so a crashed broker's assignments vanish with it.

``<prefix>/peer-secret`` holds the cluster's peer secret: 32 random bytes created
once by the first broker to start (a create-if-absent transaction). Brokers run
without ``--auth-keys`` sign their replication tokens with it, so peer endpoints
are never open to whoever can reach a broker. etcd is trusted infrastructure, as
in Gazette: whoever can read the prefix can already rewrite every route.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import aetcd
import orjson
from aetcd import rpc

from herald.keyspace.base import Change, Entry, check_expectations
from herald.keyspace.etcd_watch import Compacted, watch_revisions
from herald.keyspace.routes import Assignment, Member, MemberId, Route, route_of
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops
REVOKE_TIMEOUT_S = 2.0
ANNOUNCE_RETRY_S = 0.5
WATCH_RETRY_S = 0.5  # between attempts to re-open a broken watch
# gRPC keepalive on the etcd channel: a link that goes half-open (a partition that
# drops packets and sends no reset) otherwise leaves the watch waiting for ever, the
# mirror and every route stale. Pings every 10 s, dead after 5 s unanswered: the
# stream fails and the watch resumes (etcd refuses pings more often than its
# --grpc-keepalive-min-time, 5 s by default; pings need an open stream, the watch).
# The ping timeout matters as much: a keepalive ping is skipped while another ping
# (gRPC's bandwidth probe) is outstanding, and that one times out after 60 s.
GRPC_KEEPALIVE = {"grpc.keepalive_time_ms": 10_000, "grpc.keepalive_timeout_ms": 5_000,
                  "grpc.http2.ping_timeout_ms": 5_000, "grpc.http2.max_pings_without_data": 0}
PEER_SECRET_KEY = "peer-secret"
PEER_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class KeyValue:
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


class EtcdKeySpace:
    """A watched mirror of ``prefix`` with Herald's views over it. One event loop owns it."""

    def __init__(self, endpoint: str, prefix: str = "/herald/cluster"):
        host, _, port = endpoint.removeprefix("http://").rstrip("/").partition(":")
        self.client = aetcd.Client(host=host, port=int(port or 2379), options=GRPC_KEEPALIVE)
        self.prefix = prefix.rstrip("/")
        self.revision = 0
        self._kv: dict[str, KeyValue] = {}
        self._observers: list[Callable[[int], None]] = []
        self._revision_waiters: list[tuple[int, asyncio.Future]] = []
        self._views: dict[str, dict] = {}  # built once per revision (see `_members`)
        self._parsed: dict[str, Entry] = {}  # specs as last parsed (see `entries`)
        self._watch_task: asyncio.Task | None = None
        # Monotonic time until which our lease is certainly alive (see keep_alive).
        self.lease_valid_until = 0.0

    # -- mirror ----------------------------------------------------------------------

    async def start(self) -> None:
        """Load the prefix and start watching it. Blocks until loaded."""
        await self._load()
        self._watch_task = asyncio.create_task(self._watch(), name="etcd-watch")

    async def _load(self) -> None:
        """Replace the mirror with one range read of the prefix (at start, and when
        etcd compacted the history a broken watch would resume from)."""
        result = await self.client.get_prefix(self._key("").encode())
        self._kv, self._views = {}, {}
        for kv in result:
            self._store(kv.key.decode(), kv)
        self._advance(result.header.revision)

    async def close(self) -> None:
        if self._watch_task:
            self._watch_task.cancel()
            await asyncio.gather(self._watch_task, return_exceptions=True)
        await self.client.close()

    def _key(self, suffix: str) -> str:
        return f"{self.prefix}/{suffix}"

    def _store(self, key: str, kv) -> None:
        self._kv[key] = KeyValue(bytes(kv.value), kv.create_revision, kv.mod_revision, kv.lease)

    async def _watch(self) -> None:
        """Follow the prefix from the last revision applied whole, for ever: a broken
        stream resumes at exactly ``self.revision + 1`` (a revision is applied all at
        once, so none is ever half-seen), a compacted history reloads the prefix."""
        while True:
            try:
                await self._watch_from(self.revision + 1)
            except asyncio.CancelledError:
                raise
            except Compacted as err:
                log.warning("etcd watch resumed past compacted history (%s); reloading %s", err, self.prefix)
                await self._reload_or_wait()
            except Exception as err:  # noqa: BLE001 — edge: the etcd connection; re-watch from our revision
                log.warning("etcd watch broke (%s); resuming at revision %d", err, self.revision + 1)
                await asyncio.sleep(WATCH_RETRY_S)  # wait-ok: back-off before reconnecting

    async def _reload_or_wait(self) -> None:
        try:
            await self._load()
        except (aetcd.exceptions.ClientError, OSError) as err:
            log.warning("reloading %s from etcd failed (%s); retrying", self.prefix, err)
            await asyncio.sleep(WATCH_RETRY_S)  # wait-ok: back-off before retrying etcd

    async def _watch_from(self, start_revision: int) -> None:
        async for revision, events in watch_revisions(self.client, self._key("").encode(), start_revision):
            self._views = {}  # the mirror changes: views are rebuilt on next use
            for event in events:
                key = event.kv.key.decode()
                if event.type == rpc.Event.DELETE:
                    self._kv.pop(key, None)
                else:
                    self._store(key, event.kv)
            self._advance(revision)  # only now: observers and waiters see the whole revision

    def _advance(self, revision: int) -> None:
        if revision <= self.revision:
            return
        self.revision = revision
        for observer in self._observers:
            try:
                observer(revision)
            except Exception:  # an observer's bug must not break the watch (and lose the revision)
                log.exception("keyspace observer failed at revision %d", revision)
        ready = [w for w in self._revision_waiters if w[0] <= revision]
        self._revision_waiters = [w for w in self._revision_waiters if w[0] > revision]
        for _, future in ready:
            if not future.done():
                future.set_result(None)

    def on_change(self, observer: Callable[[int], None]) -> None:
        self._observers.append(observer)

    async def wait_for_revision(self, revision: int, timeout_s: float = 10.0) -> None:
        """Block until the mirror has applied ``revision`` (read-your-writes)."""
        if self.revision >= revision:
            return
        future = asyncio.get_running_loop().create_future()
        self._revision_waiters.append((revision, future))
        await asyncio.wait_for(future, timeout_s)

    # -- views -----------------------------------------------------------------------

    def _under(self, section: str) -> list[tuple[str, KeyValue]]:
        head = self._key(section + "/")
        return sorted((k[len(head):], v) for k, v in self._kv.items() if k.startswith(head))

    def entries(self) -> dict[str, Entry]:
        """Every spec. Each is parsed once per version (a resolver pass lists them all
        at every keyspace change: parsing 1,000 specs took ~50 ms of the loop)."""
        parsed, self._parsed = self._parsed, {}
        for name, kv in self._under("items"):
            self._parsed[name] = self._entry(kv, parsed.get(name))
        return dict(self._parsed)

    def get(self, name: str) -> Entry | None:
        kv = self._kv.get(self._key(f"items/{name}"))
        return self._entry(kv, self._parsed.get(name)) if kv else None

    @staticmethod
    def _entry(kv: KeyValue, known: Entry | None) -> Entry:
        if known is not None and known.mod_revision == kv.mod_revision and known.create_revision == kv.create_revision:
            return known
        return Entry(JournalSpec.from_dict(_json(kv.value)), kv.create_revision, kv.mod_revision)

    def members(self) -> dict[MemberId, Member]:
        return dict(self._members())

    def assignments(self) -> dict[str, list[Assignment]]:
        return {journal: list(assigned) for journal, assigned in self._assignments().items()}

    def route(self, name: str) -> Route:
        return route_of(self._assignments().get(name, []), self._members())

    # Views of the mirror built once per revision and shared by the pass's calls:
    # a resolver pass asks one route per journal, and each used to scan and sort
    # every key of the mirror (quadratic: 1,000 journals x 3 replicas held the loop
    # 5 s per pass, 3,000 for 57 s, past any lease). Dropped when the revision moves
    # (`_advance`) or the mirror is reloaded; callers get copies of the shared ones.

    def _members(self) -> dict[MemberId, Member]:
        if (members := self._views.get("members")) is None:
            members = self._views["members"] = {
                MemberId.parse(s): Member.from_json(MemberId.parse(s), kv.value, kv.create_revision)
                for s, kv in self._under("members")}
        return members

    def _assignments(self) -> dict[str, list[Assignment]]:
        if (out := self._views.get("assign")) is None:
            out = self._views["assign"] = {}
            for suffix, kv in self._under("assign"):
                journal, member, slot = Assignment.parse_key(suffix)
                out.setdefault(journal, []).append(
                    Assignment(journal, member, slot, kv.value, kv.mod_revision, kv.lease))
        return out

    def assignment_key(self, assignment: Assignment) -> str:
        return self._key("assign/" + assignment.key_suffix())

    def member_key(self, member: MemberId) -> str:
        return self._key(f"members/{member}")

    # -- writes ----------------------------------------------------------------------

    async def apply(self, changes: list[Change]) -> int:
        """Apply spec changes in one etcd transaction guarded by mod revisions."""
        check_expectations(self.entries(), changes)
        if len(changes) > MAX_TXN_OPS:
            raise ValidationError("changes", f"{len(changes)} changes exceed etcd's limit of {MAX_TXN_OPS} "
                                  "operations per transaction: split the apply (herald journals apply "
                                  f"--max-txn-size {MAX_TXN_OPS}; not atomic across chunks), or raise "
                                  "etcd's --max-txn-ops")
        tx = self.client.transactions
        compares, ops = [], []
        for change in changes:
            key = self._key(f"items/{change.name}").encode()
            if change.expect_mod_revision == 0:
                compares.append(tx.version(key) == 0)
            elif change.expect_mod_revision > 0:
                compares.append(tx.mod(key) == change.expect_mod_revision)
            if change.upsert is not None:
                ops.append(tx.put(key, orjson.dumps(change.upsert.to_dict())))
            else:
                ops.append(tx.delete(key))
        revision = await self.txn(compares, ops, "journal specs changed concurrently; re-list and retry")
        await self.wait_for_revision(revision)
        return revision

    async def txn(self, compares: list, ops: list, conflict_message: str) -> int:
        """Run a guarded transaction; ETCD_TRANSACTION_FAILED if a compare fails."""
        ok, responses = await self.client.transaction(compare=compares, success=ops, failure=[])
        if not ok:
            raise HeraldError(Status.ETCD_TRANSACTION_FAILED, conflict_message)
        return _txn_revision(responses)

    async def advertise(self, journal: str, route: Route) -> None:
        """Write ``route`` into each of the journal's assignments (each under its own
        member's lease), guarded by their mod revisions. A lost race is harmless: the
        primary advertises again after its next sync."""
        assigned = self._assignments().get(journal, [])
        value = route.to_json()
        stale = [a for a in assigned if a.value != value]
        if not stale:
            return
        tx = self.client.transactions
        compares = [tx.mod(self.assignment_key(a).encode()) == a.mod_revision for a in stale]
        ops = [tx.put(self.assignment_key(a).encode(), value, a.lease_id or None) for a in stale]
        try:
            await self.txn(compares, ops, f"assignments of {journal} changed while advertising")
        except HeraldError as err:
            log.info("%s", err.message)

    async def peer_secret(self) -> bytes:
        """The cluster's peer secret, created here if no broker created it before.

        Idempotent: the put is guarded by ``version == 0``, so concurrent first starts
        agree on one secret (the loser reads the winner's). Blocks on two etcd calls.
        """
        key = self._key(PEER_SECRET_KEY).encode()
        tx = self.client.transactions
        await self.client.transaction(compare=[tx.version(key) == 0],
                                      success=[tx.put(key, secrets.token_bytes(PEER_SECRET_BYTES))],
                                      failure=[])
        stored = await self.client.get(key)
        if stored is None or len(stored.value) < PEER_SECRET_BYTES:
            raise HeraldError(Status.INTERNAL, f"etcd key {key.decode()} does not hold a peer secret "
                              f"of {PEER_SECRET_BYTES} bytes; delete it and restart the brokers")
        return bytes(stored.value)

    async def announce(self, member: Member, ttl_s: int) -> Member:
        """Create our member key under a new lease (waits while an old key of ours lingers).

        A broker restarted within its TTL finds its previous incarnation's key still
        there; it waits for that lease to expire. The new lease is granted per attempt,
        so it cannot itself expire while we wait.
        """
        key = self.member_key(member.id).encode()
        tx = self.client.transactions
        while True:
            granted_at = asyncio.get_running_loop().time()
            lease = await self.client.lease(ttl_s)
            announced = Member(member.id, member.endpoint, lease.id, member.journal_limit)
            ok, _ = await self.client.transaction(
                compare=[tx.version(key) == 0], success=[tx.put(key, announced.to_json(), lease.id)],
                failure=[])
            if ok:
                break
            await self.client.revoke_lease(lease.id)
            log.warning("member key %s still held by a previous lease; waiting", key.decode())
            await asyncio.sleep(ANNOUNCE_RETRY_S)
        self._lease, self._member = lease, member
        self.lease_valid_until = granted_at + ttl_s
        return announced

    async def keep_alive(self, ttl_s: int) -> None:
        """Refresh our lease every third of its TTL; return once it may have expired.

        etcd expires a lease ``ttl_s`` after the last refresh it received, and may
        then hand our journals to another broker — even while we are partitioned
        from it and it is alive. So "may have expired" is judged by our own
        monotonic clock: ``ttl_s`` after the *sending* of the last refresh etcd
        answered (no grace past it), or at once when etcd says the lease is gone.
        The caller stops acknowledging appends at that point, then re-joins.
        """
        loop = asyncio.get_running_loop()
        self.lease_valid_until = loop.time() + ttl_s
        while True:
            await asyncio.sleep(max(ttl_s / 3, 0.5))
            sent = loop.time()
            try:
                alive = await self.lease_alive(timeout_s=max(ttl_s / 3, 0.5))
            except (aetcd.exceptions.ClientError, TimeoutError) as err:
                if loop.time() < self.lease_valid_until:
                    log.warning("lease refresh failed (%s); retrying", type(err).__name__)
                    continue
                log.warning("member lease of %s unconfirmed for %d s (etcd unreachable)", self._member.id, ttl_s)
                return
            if not alive:
                log.warning("member lease of %s expired in etcd", self._member.id)
                return
            self.lease_valid_until = sent + ttl_s

    async def lease_alive(self, timeout_s: float = 2.0) -> bool:
        """Whether etcd still holds our lease (refreshing it); etcd keeps leases
        across its own restarts. Raises ClientError/TimeoutError if etcd cannot say."""
        response = await asyncio.wait_for(self.client.refresh_lease(self._lease.id), timeout_s)
        return response.TTL > 0

    async def revoke(self) -> None:
        """Give our lease back so our journals move at once. Best effort: a lease
        etcd already dropped (we were paused past it), or an etcd that cannot be
        reached, only means the lease expires by itself — one line, no traceback."""
        try:
            await asyncio.wait_for(self.client.revoke_lease(self._lease.id), REVOKE_TIMEOUT_S)
        except (aetcd.exceptions.ClientError, TimeoutError) as err:
            log.info("lease of %s not revoked (%s); it expires by itself", self._member.id,
                     type(err).__name__)


def _json(raw: bytes) -> dict:
    return orjson.loads(raw)


def _txn_revision(responses: list) -> int:
    """The revision a successful transaction wrote at, from its first op's header."""
    for response in responses:
        kind = response.WhichOneof("response")
        return getattr(response, kind).header.revision
    return 0
