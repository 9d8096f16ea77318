"""Reads below the write head that the fragment index cannot place: holes.

After a fail-over a newly assigned replica rolls forward to the primary's write
head with nothing below it; the primary persists what it held, and the replica
learns of those fragments from a store listing — Herald's periodic one comes a
``refresh_interval`` (a minute by default) later. Until then the offsets are
committed (below the head) yet absent from the index. Any peerset member serves
reads, so answering there "not yet available" (416) or ending the read quietly
made a reader conclude the range was empty: a stream-sum run lost a chunk so.

A read that misses below the head therefore (1) lists the stores now
(single-flight and rate-limited per journal, `FragmentKeeper.refresh_now`) and
reads from what that shows; (2) if still missing and this broker is not the
primary, proxies the read to the primary, which holds the bytes in its spool or
knows their fragments; (3) else answers INSUFFICIENT_JOURNAL_BROKERS (503,
retryable: a replica is still persisting the range). A blocking read waits and
lists again. A range deleted from the stores (prune, retention) is not a hole:
the index query jumps over it as in Gazette, before any of this applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from herald.auth import Capability
from herald.broker.journal import Journal
from herald.broker.proxy import Forwarded, forward, is_proxied
from herald.fragment.index import Located
from herald.protocol.errors import HeraldError, Status

if TYPE_CHECKING:
    from herald.broker.service import Broker

HOLE_RETRY_S = 1.0  # a blocking read in a hole lists again this often (rate-limited)


async def locate_or_list(journal: Journal, offset: int) -> Located | None:
    """`Journal.locate`, listing the stores first when ``offset`` is in a hole;
    FRAGMENT_STORE_UNHEALTHY naming the store if it was never listed."""
    located = journal.locate(offset)
    if located is None and not journal.fragments.listed:
        # Its store was never listed (it fails or hangs): the index, and so the head,
        # are unknown, and listing again would wait on the same store.
        raise journal.fragments.unlisted_error()
    if located is None and offset < journal.write_head:
        await journal.fragments.refresh_now()
        located = journal.locate(offset)
    return located


def hole_error(journal: Journal, offset: int) -> HeraldError:
    head = journal.write_head
    return HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                       f"offset {offset} of {journal.spec.name} is committed (the write head is {head}) but "
                       "no fragment this broker knows of holds it yet: a replica is still persisting it; retry",
                       "offset", extra={"write_head": head})


async def from_primary_or_hole_error(request: web.Request, broker: Broker, journal: Journal,
                                     offset: int) -> HeraldError:
    """For a read in a hole: raise `Forwarded` with the primary's answer when this
    broker is a replica and the request was not proxied here already (one hop, no
    loops); else return the retryable error to raise."""
    name = journal.spec.name
    if not journal.is_primary and not is_proxied(request):
        endpoint = broker.route(name).primary_endpoint
        if endpoint and endpoint != broker.endpoint:
            credentials = broker.peer_headers(request.get("capability", Capability.READ), name)
            raise Forwarded(await forward(request, endpoint, broker.session, None, credentials,
                                          broker.keyspace.revision))
    return hole_error(journal, offset)
