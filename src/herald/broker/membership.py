"""A cluster broker's membership: keeping its etcd lease, and re-joining when it
may have lapsed (an etcd outage, a pause past the lease), without a supervisor."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import aetcd.exceptions

from herald.broker.backoff import RetryPacer
from herald.keyspace.routes import Member

if TYPE_CHECKING:
    from herald.broker.service import Broker

log = logging.getLogger(__name__)


async def keep_lease(broker: Broker, ttl_s: int) -> None:
    """Keep the broker's lease; when it may have expired, stop acknowledging appends
    at once (demote every journal) and re-join — with the same lease if etcd still
    holds it, else a new one — retrying etcd with back-off. Never exits: an etcd
    outage or a paused broker heals without a supervisor."""
    while not broker.stopping.is_set():
        await broker.keyspace.keep_alive(ttl_s)
        broker.lease_valid = False
        for journal in broker.journals.values():
            journal.demote()
        log.warning("lease of %s may have expired: appends refused until the broker re-joins",
                    broker.member_id)
        await _rejoin(broker, ttl_s)


async def _rejoin(broker: Broker, ttl_s: int) -> None:
    loop, pacer = asyncio.get_running_loop(), RetryPacer(initial_s=0.5, max_s=5.0)
    while not broker.stopping.is_set():
        try:
            if await broker.keyspace.lease_alive():
                log.info("etcd still holds the lease of %s: resuming", broker.member_id)
            else:
                await broker.keyspace.announce(Member(broker.member_id, broker.endpoint), ttl_s)
                log.info("re-joined the cluster as %s with a new lease", broker.member_id)
            broker.lease_valid = True
            await broker.sync_journals(wait=False)  # roles from the routes etcd holds now
            return
        except (aetcd.exceptions.ClientError, TimeoutError, OSError) as err:
            if warning := pacer.failed(loop.time()):
                log.warning("etcd unreachable while re-joining (%s): %s", warning, type(err).__name__)
            await asyncio.sleep(pacer.wait_s(loop.time()))  # wait-ok: back-off before retrying etcd
