"""The broker process: keyspace, the journals it serves, routing, and its HTTP server.

Embedded mode (no ``--etcd``) is a cluster of one: the local keyspace holds specs
and this broker is primary for every journal. Cluster mode mirrors etcd, announces
this broker as a member under a lease, runs the allocator, and serves the journals
assigned to it: as primary (appends, replicated to its peers) or as a replica
(replicated writes and reads). Requests for anything else are proxied.

Lifecycle: ``start`` opens journals and binds; ``stop`` (SIGTERM) stops accepting,
ends blocking reads, finishes in-flight appends, rolls and persists spools, and
(in a cluster) revokes its lease so its journals move at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from functools import partial

import aiohttp
from aiohttp import web

from herald.auth import AuthKeys, Capability
from herald.broker.authz import PeerTokens
from herald.broker.change_signal import ChangeSignal
from herald.broker.datadir import DataDirLock
from herald.broker.front import FrontSite
from herald.broker.journal import Journal
from herald.broker.journal_tasks import JournalTasks
from herald.broker.limits import runner_limits
from herald.broker.listener import listen, tls_contexts
from herald.broker.membership import keep_lease
from herald.broker.ratelimit import AppendRates
from herald.broker.replication import Pipeline
from herald.broker.settings import BrokerSettings
from herald.broker.sync_rounds import rounds_of_running_loop
from herald.fragment.stores import Store, open_store
from herald.keyspace.base import Entry
from herald.keyspace.local import LocalKeySpace
from herald.keyspace.routes import Member, MemberId, Route
from herald.protocol.errors import HeraldError, JournalNotFoundError, Status
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)

ROUTE_WAIT_S = 5.0


class Broker:
    """One broker process's state. Owned by a single asyncio event loop."""

    def __init__(self, settings: BrokerSettings):
        self.settings = settings
        self.member_id = MemberId(settings.zone, settings.id or secrets.token_hex(4))
        self.keyspace = LocalKeySpace(settings.data_dir) if not settings.etcd else None
        self.journals: dict[str, Journal] = {}
        self.stopping = asyncio.Event()
        self.endpoint = ""
        self.session: aiohttp.ClientSession | None = None
        self.peer_tls: ssl.SSLContext | None = None
        self._stores: dict[str, Store] = {}
        self._journal_tasks = JournalTasks()  # opens and closes under way (see sync_journals)
        self._keyspace_changes = ChangeSignal()
        self._tasks: list[asyncio.Task] = []
        self._runner: web.AppRunner | None = None
        self._data_dir_lock = DataDirLock(settings.data_dir, lone_append_bytes=settings.lone_append_bytes)
        self.append_rates = AppendRates(settings.max_append_rate)
        # False while our etcd lease may have expired: no journal may act as primary.
        self.lease_valid = True
        self._started = False  # serving: journals opened from now on persist at once
        self.auth_keys = AuthKeys.parse(settings.auth_keys, "--auth-keys") if settings.auth_keys else None
        self._proxy_tokens = PeerTokens(self.auth_keys, str(self.member_id)) if self.auth_keys else None
        # What signs and verifies replication between peers: set on joining a cluster
        # (_join_cluster); None while embedded, so /v1/replicate/* refuses everyone.
        self.peer_keys: AuthKeys | None = None
        self._replica_tokens: PeerTokens | None = None
        if self.auth_keys and self.auth_keys.short_keys:
            log.warning("%d of the --auth-keys are shorter than 32 bytes (RFC 7518 §3.2): "
                        "use e.g. `openssl rand -base64 32`", self.auth_keys.short_keys)

    def may_acknowledge(self) -> bool:
        """Whether our etcd lease is certainly still ours (always, embedded): judged by
        our monotonic clock, so it turns false the moment a pause outlives the lease."""
        if not self.is_cluster:
            return True
        return self.lease_valid and asyncio.get_running_loop().time() < self.keyspace.lease_valid_until

    def peer_headers(self, capability: int, journal: str) -> dict[str, str]:
        """This broker's own credentials for a peer request about ``journal``: a
        REPLICATE token signed by the peer keys, or for a proxied request a token from
        ``--auth-keys`` (none without them: the client endpoints are open)."""
        tokens = self._replica_tokens if capability & Capability.REPLICATE else self._proxy_tokens
        return tokens.headers(capability, journal) if tokens else {}

    async def _load_peer_keys(self) -> None:
        """The peer keys: ``--auth-keys`` (less ``AA==``, which anyone can sign with),
        else the cluster's peer secret kept in etcd (created by the first broker)."""
        keys = self.auth_keys.without_anonymous() if self.auth_keys else None
        if keys is None:
            keys = AuthKeys([await self.keyspace.peer_secret()], allows_anonymous=False)
        self.peer_keys = keys
        self._replica_tokens = PeerTokens(keys, str(self.member_id))

    @property
    def is_cluster(self) -> bool:
        return self.settings.etcd is not None

    # -- keyspace → journals -------------------------------------------------------------

    def _signal_keyspace_change(self) -> None:
        self._keyspace_changes.signal()

    async def wait_keyspace_change(self) -> None:
        """Return after the next keyspace change."""
        await self._keyspace_changes.wait()

    def next_keyspace_change(self) -> asyncio.Event:
        """An event set at the next keyspace change. List watches take it *before*
        reading the keyspace, so no change between the read and the wait is missed."""
        return self._keyspace_changes.next()

    def stores_for(self, spec: JournalSpec, field: str = "fragment.stores") -> list[Store]:
        """Open (once) the stores ``spec`` names. Raises ValidationError naming
        ``{field}[i]`` for a store that cannot open (a missing backend package): apply
        calls this before saving anything [I-APPLY-1]."""
        stores = []
        for i, url in enumerate(spec.fragment.stores):
            if url not in self._stores:
                self._stores[url] = open_store(url, str(self.settings.resolved_file_root),
                                               field=f"{field}[{i}]")
            stores.append(self._stores[url])
        return stores

    def route(self, name: str) -> Route:
        """Who serves ``name``: this broker alone (embedded) or its assigned peerset."""
        if not self.is_cluster:
            return Route((self.member_id,), 0, (self.endpoint,))
        return self.keyspace.route(name)

    async def sync_journals(self, wait: bool = True) -> None:
        """Serve exactly the journals assigned here, each in its current role.

        Roles are set at once; opening and closing journals are tasks of their own,
        never awaited by the pass: a journal whose open waited on a store that
        accepts and never answers held the whole pass, and with it every other
        journal's fail-over and every new journal. With ``wait``, return once the
        journals being opened are open (bounded: an open waits at most
        `fragment_keeper.OPEN_LISTING_S` for its store listing)."""
        opening = self._resolve()
        if wait and opening:
            await asyncio.wait(opening)

    def _resolve(self) -> list[asyncio.Task]:
        """One pass over the keyspace: set each served journal's spec and role, start
        opening those newly assigned here and closing those no longer; the opens."""
        entries, opening = self.keyspace.entries(), []
        for name, entry in entries.items():
            route = self.route(name)
            if self.member_id not in route.members:
                continue
            journal = self.journals.get(name)
            if journal is None:
                opening.append(self._journal_tasks.open(name, partial(self._open, name)))
            else:
                self._update(journal, entry, route)
        for name in [n for n in self.journals
                     if n not in entries or self.member_id not in self.route(n).members]:
            self._start_close(name)
        return opening

    async def _open(self, name: str) -> None:
        """Open ``name``, then give it the role the keyspace holds *now*; a journal
        that cannot be served (its store will not open, its spool directory is
        unusable) is logged and skipped, never allowed to stop the broker or the
        other journals [I-RESTART-1]."""
        entry = self.keyspace.get(name)
        if entry is None or self.member_id not in self.route(name).members or self.stopping.is_set():
            return
        try:
            journal = await Journal.open(entry.spec, self.settings.data_dir, self.stores_for(entry.spec),
                                         lease_ok=self.may_acknowledge, persist_recovered=self._started,
                                         commit_log=self._data_dir_lock.commit_log)
        except (HeraldError, OSError, ValueError) as err:
            message = err.message if isinstance(err, HeraldError) else str(err)
            log.error("cannot serve journal (retried at the next keyspace change): %s", message,
                      extra={"journal": name})
            return
        self.journals[name] = journal
        if self._started:  # opened while start() handed the recovered spools over: hand its own
            journal.persist_recovered()
        log.info("serving journal", extra={"journal": name, "write_head": journal.write_head,
                                           "listed": journal.fragments.listed})
        entry, route = self.keyspace.get(name), self.route(name)
        if entry is None or self.member_id not in route.members:
            self._start_close(name)  # unassigned while it opened
        else:
            self._update(journal, entry, route)

    def _update(self, journal: Journal, entry: Entry, route: Route) -> None:
        """The spec and role the keyspace holds; a spec whose store will not open is
        logged and retried at the next keyspace change."""
        try:
            if journal.spec != entry.spec:
                journal.update_spec(entry.spec, self.stores_for(entry.spec))
        except HeraldError as err:
            log.error("cannot serve journal: %s", err.message, extra={"journal": entry.spec.name})
            return
        self._set_role(journal, route)

    def _start_close(self, name: str) -> None:
        self.append_rates.forget(name)
        self._journal_tasks.close(name, self.journals.pop(name))

    def _set_role(self, journal: Journal, route: Route) -> None:
        """Primary or replica; a primary whose peerset changed gets a fresh pipeline."""
        if route.primary_member != self.member_id or not self.lease_valid:
            journal.demote()
            return
        peers = [e for m, e in zip(route.members, route.endpoints) if m != self.member_id]
        if not peers:
            journal.become_primary(None)
        elif journal.pipeline is None or journal.pipeline.peers != peers:
            name = journal.spec.name
            journal.become_primary(Pipeline(name, peers, self.session, lambda: self._advertise(name),
                                            primary=str(self.member_id),
                                            credentials=lambda: self.peer_headers(Capability.REPLICATE, name),
                                            revision=lambda: self.keyspace.revision, tls=self.peer_tls))
            journal.poke()  # sync the new peerset now, without waiting for an append
        else:
            journal.become_primary(journal.pipeline)  # same peers: keep the synced pipeline

    async def _advertise(self, name: str) -> None:
        """Write the route into every assignment of ``name`` (marks it consistent)."""
        if self.is_cluster:
            await self.keyspace.advertise(name, self.route(name))

    # -- routing ---------------------------------------------------------------------------

    def local_journal(self, name: str, need_primary: bool) -> Journal | None:
        """The local replica able to serve, or None when the request must go elsewhere."""
        journal = self.journals.get(name)
        if journal is None or (need_primary and not journal.is_primary):
            return None
        return journal

    async def route_target(self, name: str, need_primary: bool) -> str:
        """The endpoint to proxy to; waits briefly for the allocator, else fails clearly."""
        if self.keyspace.get(name) is None:
            raise JournalNotFoundError(name)
        deadline = asyncio.get_running_loop().time() + ROUTE_WAIT_S
        while True:
            route = self.route(name)
            endpoint = route.primary_endpoint if need_primary else (
                route.primary_endpoint or (route.endpoints[0] if route.endpoints else None))
            if endpoint and endpoint != self.endpoint:
                return endpoint
            if asyncio.get_running_loop().time() > deadline:
                status = Status.NO_JOURNAL_PRIMARY_BROKER if route.members else Status.INSUFFICIENT_JOURNAL_BROKERS
                raise HeraldError(status, f"no broker can serve {name} yet; retry")
            try:
                await asyncio.wait_for(self.wait_keyspace_change(), ROUTE_WAIT_S)
            except TimeoutError:
                pass
            await self.sync_journals()
            if self.local_journal(name, need_primary) is not None:
                return ""

    async def until_rerouted(self, name: str, need_primary: bool, endpoint: str) -> None:
        """Return once ``endpoint`` no longer serves ``name`` as asked (primary, or any
        member) in this broker's view of the keyspace: a request forwarded there and
        still unanswered is then abandoned (`herald.broker.proxy`)."""
        while True:
            changed = self.next_keyspace_change()  # taken before the route is read
            route = self.route(name)
            serving = (route.primary_endpoint,) if need_primary else route.endpoints
            if endpoint not in serving:
                return
            await changed.wait()

    async def catch_up_to_route(self, name: str, need_primary: bool, revision: int) -> Journal | None:
        """The local journal for a proxied request, once this broker has applied the
        keyspace ``revision`` the proxier routed by and served its assignments; None
        if it still cannot serve (the route moved on: the client re-resolves)."""
        try:
            await self.keyspace.wait_for_revision(revision, ROUTE_WAIT_S)
        except TimeoutError:
            return None
        await self.sync_journals()
        return self.local_journal(name, need_primary)

    def resolve(self, name: str) -> Journal:
        """The local journal (embedded mode, and control APIs that need local state)."""
        journal = self.journals.get(name)
        if journal is None:
            raise JournalNotFoundError(name)
        return journal

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, app: web.Application) -> str:
        """Lock the data dir, bind, join the cluster (if any), open journals; return
        ``http://HOST:PORT``. Raises HeraldError naming the flag when the data dir is
        another broker's or the address cannot be bound."""
        server_tls, peer_tls = tls_contexts(self.settings)
        self._data_dir_lock.acquire()
        sock = listen(self.settings.host, self.settings.port)
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=peer_tls or True))
        self.peer_tls = peer_tls  # replication streams connect without the session (peer_stream)
        # auto_decompress=False: bodies are taken raw (identity_bodies_middleware refuses
        # any Content-Encoding); aiohttp must not inflate them before that check.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0,
                                     auto_decompress=False, **runner_limits(self.settings))
        await self._runner.setup()
        host, port = sock.getsockname()[:2]
        scheme = "https" if server_tls else "http"
        self.endpoint = self.settings.advertise or f"{scheme}://{host}:{port}"
        if self.is_cluster:
            await self._join_cluster()
        else:
            self.keyspace.on_change(lambda _rev: self._signal_keyspace_change())
        await self.sync_journals()
        # Plain TCP: plain appends take the fast path, the rest goes to aiohttp (front.py).
        site = (web.SockSite(self._runner, sock, ssl_context=server_tls) if server_tls
                else FrontSite(self._runner, sock, self))
        await site.start()
        # Serve first, then upload what the last run left in spools: thousands of
        # uploads racing the opening of thousands of journals made a restart slow
        # (issue 19 §1). Until uploaded, those bytes are read from the local spools.
        self._started = True
        for journal in self.journals.values():
            journal.persist_recovered()
        return f"{scheme}://{host}:{port}"

    async def _join_cluster(self) -> None:
        from herald.allocator.driver import Allocator
        from herald.keyspace.etcd import EtcdKeySpace

        self.keyspace = EtcdKeySpace(self.settings.etcd, self.settings.etcd_prefix)
        rounds_of_running_loop().rounds_on_loop = False  # the lease's keep-alive runs on this loop
        await self.keyspace.start()
        await self._load_peer_keys()
        ttl = self.settings.etcd_lease_s
        await self.keyspace.announce(Member(self.member_id, self.endpoint), ttl)
        self.keyspace.on_change(lambda _rev: self._signal_keyspace_change())
        allocator = Allocator(self.keyspace, self.member_id)
        first_change = self.next_keyspace_change()  # taken before start() reads the keyspace
        self._tasks = [asyncio.create_task(keep_lease(self, ttl), name="lease-keepalive"),
                       asyncio.create_task(allocator.run(), name="allocator"),
                       asyncio.create_task(self._follow_keyspace(first_change), name="resolver")]
        log.info("joined cluster etcd=%s member=%s", self.settings.etcd, self.member_id)

    async def _follow_keyspace(self, changed: asyncio.Event) -> None:
        """Re-resolve the journals at every keyspace change. The next change's event
        is taken *before* each pass reads the keyspace, so no change is lost between
        two passes: a primary once kept a two-broker pipeline for a minute after its
        third replica was assigned back (test_cluster_resolver)."""
        while not self.stopping.is_set():
            await changed.wait()
            await asyncio.sleep(0.02)  # one re-resolve for a burst of watch events
            changed = self.next_keyspace_change()
            try:
                await self.sync_journals(wait=False)
            except Exception:  # process edge: keep following the keyspace
                log.exception("re-resolving journals failed; retrying on the next change")
                self._signal_keyspace_change()

    async def stop(self) -> None:
        """Stop accepting, end blocking reads, finish appends, persist spools, leave."""
        log.info("broker stopping")
        self.stopping.set()
        self._signal_keyspace_change()
        if self._runner is not None:
            # cleanup closes the listener, then waits for in-flight handlers (appends
            # mid-body finish; blocking reads end on ``stopping``) before closing.
            await self._runner.cleanup()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Opens end within OPEN_LISTING_S (they then see ``stopping``); closes are bounded.
        await self._journal_tasks.wait_all()
        # Concurrently: each close may wait for its persister's bounded drain.
        await asyncio.gather(*(journal.close() for journal in list(self.journals.values())))
        if self.is_cluster:
            await self.keyspace.revoke()
            await self.keyspace.close()
        if self.session is not None:
            await self.session.close()
        self._data_dir_lock.release()
        log.info("broker stopped")
