"""Store listings' threads, one small set per store endpoint (scheme and host).

Listings run on threads of their own: a hanging store's listings occupy its own
threads, not the default executor that opens journals, nor another store's
listings. They are daemon threads (`LoopThreads`), abandoned at exit: a listing a
store holds must not keep the broker from stopping, and so from restarting (a
`concurrent.futures` pool's threads are joined at exit). Keyed by endpoint, not
by whole store URL: journals with a store each would otherwise get threads each.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from herald.broker.loop_threads import LoopThreads
from herald.fragment.stores import Store

__all__ = ["LIST_THREADS_PER_STORE", "listing_threads"]

# Sixteen, not four: after a restart, 1,000 journals on an endpoint 100 ms away
# waited minutes for their first listing, which a journal needs before it takes an
# append (bench/slow_store_restart.py). A hung endpoint holds at most this many.
LIST_THREADS_PER_STORE = 16
_list_threads: dict[tuple[tuple[str, str], ...], LoopThreads] = {}


def listing_threads(stores: list[Store]) -> LoopThreads:
    """The listing threads of the endpoints ``stores`` live on."""
    key = tuple(urlsplit(store.url)[:2] for store in stores)
    if key not in _list_threads:
        _list_threads[key] = LoopThreads(LIST_THREADS_PER_STORE, "herald-list")
    return _list_threads[key]
