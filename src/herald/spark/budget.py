"""A micro-batch's budget: how far each journal's next batch may read.

Two limits, either or both: ``maxBytesPerTrigger`` (journal offsets are bytes, so
this is Kafka's ``maxOffsetsPerTrigger`` in Herald's units) and
``maxRowsPerTrigger`` (messages). Both are shared fairly across journals by
water-filling: each journal gets an equal share, and what one cannot use goes to
the others.

Journals hold no message counts, so a row budget is turned into byte offsets from
a sample: the driver reads up to `SAMPLE_BYTES` at each journal's next offset and
counts messages (one per line: NDJSON and CSV records). Where the sample holds the
journal's whole share, the batch ends exactly after that many messages; beyond it,
the sample's bytes per message are extrapolated, so a batch may hold somewhat more
or fewer rows than asked (as Kafka's own limit is split across partitions by
estimate). The sample costs one bounded read per journal with new bytes, per trigger.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from herald.client import BrokerClient

__all__ = ["SAMPLE_BYTES", "row_budget_ends", "sampler_of", "share_bytes", "water_fill"]

#: Bytes read at a journal's next offset to count messages for a row budget.
SAMPLE_BYTES = 64 << 10

#: ``sample(journal, start, end)``: up to ``end - start`` bytes at ``start``.
Sampler = Callable[[str, int, int], bytes]


def sampler_of(client: BrokerClient) -> Sampler:
    """Samples read through ``client`` (fewer bytes where a range was pruned)."""

    def sample(journal: str, start: int, end: int) -> bytes:
        with client.read(journal, start, end) as reader:
            return b"".join(chunk for _, chunk in reader)

    return sample


def water_fill(avail: dict[str, int], budget: int) -> dict[str, int]:
    """Grant each key up to ``avail[key]`` out of ``budget``, as equally as possible."""
    grant = dict.fromkeys(avail, 0)
    left, open_ = budget, sorted(k for k in avail if avail[k] > 0)
    while left > 0 and open_:
        share = max(1, left // len(open_))
        for key in list(open_):
            take = min(share, avail[key] - grant[key], left)
            grant[key] += take
            left -= take
            if grant[key] >= avail[key]:
                open_.remove(key)
            if left <= 0:
                break
    return grant


def share_bytes(begin: dict[str, int], heads: dict[str, int], budget: int | None) -> dict[str, int]:
    """End offsets: every available byte, or ``budget`` bytes shared across journals."""
    avail = {j: max(0, heads[j] - begin[j]) for j in heads}
    if budget is None:
        return {j: begin[j] + avail[j] for j in heads}
    grant = water_fill(avail, budget)
    return {j: begin[j] + grant[j] for j in heads}


def row_budget_ends(begin: dict[str, int], heads: dict[str, int], rows: int, sample: Sampler) -> dict[str, int]:
    """End offsets holding about ``rows`` messages in all, shared across journals."""
    samples = {j: sample(j, begin[j], min(heads[j], begin[j] + SAMPLE_BYTES))
               for j in heads if heads[j] > begin[j]}
    per_row = {j: _bytes_per_row(data, heads[j] - begin[j]) for j, data in samples.items()}
    avail_rows = {j: max(1, math.ceil((heads[j] - begin[j]) / per_row[j])) for j in samples}
    grant = water_fill(avail_rows, max(1, rows))
    ends = dict(begin)
    for journal, data in samples.items():
        if grant[journal]:
            ends[journal] = begin[journal] + _bytes_for(data, grant[journal], per_row[journal],
                                                         heads[journal] - begin[journal])
    return ends


def _bytes_per_row(data: bytes, available: int) -> float:
    """Mean message size in the sample (a sample with no whole message is one message
    at least as long as what is available to read)."""
    lines = data.count(b"\n")
    return (data.rfind(b"\n") + 1) / lines if lines else float(max(len(data), available, 1))


def _bytes_for(data: bytes, rows: int, per_row: float, available: int) -> int:
    """Bytes holding ``rows`` messages: exact within the sample, extrapolated beyond."""
    at = -1
    for _ in range(rows):
        at = data.find(b"\n", at + 1)
        if at < 0:
            break
    else:
        return at + 1
    whole = data.rfind(b"\n") + 1
    counted = data.count(b"\n")
    return min(available, max(whole, 1) + math.ceil((rows - counted) * per_row))
