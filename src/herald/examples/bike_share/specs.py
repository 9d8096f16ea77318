"""The bike-share journals: rides (``text/csv``, by bike ID) and cycles (NDJSON), as Gazette's example names them.

Labels follow the seed: ``app.herald.dev/message-type`` is ``bike_share.Ride`` or
``bike_share.Cycle`` (the selectors the loader and the job use) and
``example-name=bike-share`` groups them for ``herald journals list``.
"""

from __future__ import annotations

from herald.client import BrokerClient

__all__ = ["apply_journals", "journal_specs"]

PREFIX = "examples/bike-share"


def _spec(name: str, content_type: str, message_type: str, store: str) -> dict:
    return {"name": name, "replication": 1,
            "labels": [{"name": "content-type", "value": content_type},
                       {"name": "app.herald.dev/message-type", "value": message_type},
                       {"name": "example-name", "value": "bike-share"}],
            "fragment": {"length": 4 << 20, "compression_codec": "SNAPPY", "stores": [store],
                         "refresh_interval": "1m0s"}}


def journal_specs(rides: int = 4, cycles: int = 2, store: str = "file:///") -> list[dict]:
    """Specs of ``rides`` ride partitions and ``cycles`` cycle partitions."""
    return ([_spec(f"{PREFIX}/rides/part-{i:03d}", "text/csv", "bike_share.Ride", store) for i in range(rides)]
            + [_spec(f"{PREFIX}/cycles/part-{i:03d}", "application/x-ndjson", "bike_share.Cycle", store)
               for i in range(cycles)])


def apply_journals(client: BrokerClient, rides: int = 4, cycles: int = 2, store: str = "file:///") -> list[str]:
    """Create (or update) the journals; returns their names."""
    specs = journal_specs(rides, cycles, store)
    client.apply([{"upsert": s, "expect_mod_revision": -1} for s in specs])
    return [s["name"] for s in specs]
