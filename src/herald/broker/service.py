"""The broker process: keyspace, the journals it serves, and its HTTP server.

Embedded mode (no etcd) is a cluster of one: the local keyspace holds specs and
this broker is primary for every journal. Lifecycle: ``start`` opens every
journal and binds; ``stop`` (SIGTERM) stops accepting, finishes in-flight appends,
rolls and persists spools, and returns.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from aiohttp import web

from herald.broker.journal import Journal
from herald.broker.settings import BrokerSettings
from herald.fragment.stores import Store, open_store
from herald.keyspace.base import Entry
from herald.keyspace.local import LocalKeySpace
from herald.protocol.errors import JournalNotFoundError
from herald.protocol.journal import JournalSpec

log = logging.getLogger(__name__)


class Broker:
    """One broker process's state. Owned by a single asyncio event loop."""

    def __init__(self, settings: BrokerSettings):
        self.settings = settings
        self.keyspace = LocalKeySpace(settings.data_dir)
        self.journals: dict[str, Journal] = {}
        self.stopping = asyncio.Event()
        self.endpoint = ""
        self._stores: dict[str, Store] = {}
        self._sync_lock = asyncio.Lock()
        self._keyspace_changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.keyspace.on_change(lambda _rev: self._signal_keyspace_change())

    # -- keyspace → journals -------------------------------------------------------------

    def _signal_keyspace_change(self) -> None:
        event, self._keyspace_changed = self._keyspace_changed, asyncio.Event()
        event.set()

    async def wait_keyspace_change(self) -> None:
        """Return after the next apply (list watches await this)."""
        await self._keyspace_changed.wait()

    def stores_for(self, spec: JournalSpec) -> list[Store]:
        stores = []
        for url in spec.fragment.stores:
            if url not in self._stores:
                self._stores[url] = open_store(url, str(self.settings.resolved_file_root))
            stores.append(self._stores[url])
        return stores

    async def sync_journals(self) -> None:
        """Open journals new to the keyspace, update changed ones, close deleted ones."""
        async with self._sync_lock:
            entries = self.keyspace.entries()
            for name, entry in entries.items():
                await self._open_or_update(name, entry)
            for name in [n for n in self.journals if n not in entries]:
                journal = self.journals.pop(name)
                await journal.close()
                log.info("stopped serving deleted journal=%s", name)

    async def _open_or_update(self, name: str, entry: Entry) -> None:
        journal = self.journals.get(name)
        stores = self.stores_for(entry.spec)
        if journal is None:
            self.journals[name] = await Journal.open(entry.spec, self.settings.data_dir, stores)
            log.info("serving journal=%s write_head=%d", name, self.journals[name].write_head)
        elif journal.spec != entry.spec:
            journal.update_spec(entry.spec, stores)

    def resolve(self, name: str) -> Journal:
        journal = self.journals.get(name)
        if journal is None:
            raise JournalNotFoundError(name)
        return journal

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, app: web.Application) -> str:
        """Open journals, bind, and return the endpoint ``http://HOST:PORT``."""
        await self.sync_journals()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=5.0)
        await self._runner.setup()
        sock = socket.create_server((self.settings.host, self.settings.port), reuse_port=False)
        site = web.SockSite(self._runner, sock)
        await site.start()
        host, port = sock.getsockname()[:2]
        self.endpoint = f"http://{host}:{port}"
        return self.endpoint

    async def stop(self) -> None:
        """Stop accepting, end blocking reads, finish appends, persist spools."""
        log.info("broker stopping")
        self.stopping.set()
        self._signal_keyspace_change()
        if self._runner is not None:
            # cleanup closes the listener, then waits for in-flight handlers (appends
            # mid-body finish; blocking reads end on ``stopping``) before closing.
            await self._runner.cleanup()
        for journal in list(self.journals.values()):
            await journal.close()
        log.info("broker stopped")
