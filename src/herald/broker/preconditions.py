"""What a primary checks before it writes an append: enough replicas, and a head at
or past every persisted byte (Gazette's append preconditions, gazette-facts §8.2).

- A peerset smaller than the spec's ``replication`` (brokers died and no spare is
  left) refuses appends with INSUFFICIENT_JOURNAL_BROKERS: acknowledging on fewer
  copies than asked would let the next failure lose acknowledged bytes
  [I-APPEND-3]. Appends are taken again as soon as the allocator fills the
  peerset. Checked when a request arrives (every append path: the aiohttp
  gateway, the JSON API, and the httptools fast path, which hands a short
  peerset's append to the awaiting path), after a wait of at most
  PEERSET_WAIT_S for the route to fill, and again when its group is written,
  since the route may have shrunk while it waited in the queue.
- A fragment index (the store listing) that ends past the spool — persisted
  content this primary never held: a restored backup, fragments of an earlier
  life of the journal, a listing that failed when the journal was opened — would
  have appends land at offsets persisted bytes already cover. Gazette refuses with
  INDEX_HAS_GREATER_OFFSET until an operator resets the head; Herald's primary
  rolls its spool forward to the index's end instead (its peers follow at the
  next pipeline sync), which is what the reset would do, without the outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from herald.protocol.errors import HeraldError, Status

if TYPE_CHECKING:
    from herald.broker.journal import Journal

log = logging.getLogger(__name__)

PEERSET_WAIT_S = 5.0  # how long an append waits for a short peerset to fill (as service.ROUTE_WAIT_S)


def peerset_size(journal: Journal) -> int:
    """How many brokers an append of ``journal`` is written by: the primary and its
    pipeline's peers (one without a pipeline: embedded, or a peerset of one)."""
    return 1 + (len(journal.pipeline.peers) if journal.pipeline is not None else 0)


def peerset_is_short(journal: Journal) -> bool:
    return peerset_size(journal) < journal.spec.replication


async def await_full_peerset(journal: Journal, timeout_s: float = PEERSET_WAIT_S) -> None:
    """Return once the peerset has ``replication`` brokers; INSUFFICIENT_JOURNAL_BROKERS
    if it still has not after ``timeout_s``. A route that just grew reaches the
    brokers one watch event apart, so an append arriving in between waits for the
    journal's next role change rather than failing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        changed = journal.role_changes.next()  # taken before the check: no change is missed
        remaining = deadline - loop.time()
        if not peerset_is_short(journal) or remaining <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), remaining)
    require_full_peerset(journal)


def require_full_peerset(journal: Journal) -> None:
    """Raise INSUFFICIENT_JOURNAL_BROKERS (503, retryable) while the peerset is
    smaller than ``replication``. The embedded broker refuses specs with
    ``replication`` > 1 at apply, so there it always passes."""
    have, want = peerset_size(journal), journal.spec.replication
    if have < want:
        raise HeraldError(Status.INSUFFICIENT_JOURNAL_BROKERS,
                          f"{journal.spec.name} has {have} of its {want} replicas (spec replication "
                          f"{want}); appends wait until the allocator assigns more brokers", "journal")


def catch_up_to_index(journal: Journal, syncing: bool = False) -> bool:
    """Roll the primary's spool forward to the index's end if the index is ahead
    (INDEX_HAS_GREATER_OFFSET); whether it did. Called holding the spool lock: by
    the append task before each group, and by `Pipeline.sync` (``syncing``) after
    its peers answered. While a pipeline is unsynced only the sync catches up: a
    live peer ahead of us must win first, since rolling forward to it adopts its
    registers, which the listing cannot tell. A roll marks the pipeline unsynced,
    so every peer rolls forward too before the next group is replicated."""
    if journal.pipeline is not None and not journal.pipeline.synced and not syncing:
        return False
    index_end = journal.index.end_offset
    _, end, registers = journal.spool_position()
    if index_end <= end:
        return False
    log.warning("journal=%s: persisted fragments end at %d, past the spool's %d; rolling forward "
                "before appending (INDEX_HAS_GREATER_OFFSET)", journal.spec.name, index_end, end)
    journal.roll_forward(index_end, registers)
    if journal.pipeline is not None:
        journal.pipeline.synced = False
    return True
