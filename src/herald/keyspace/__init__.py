"""Where journal specs live and how they change: revisions and compare-and-set.

``local`` keeps them in a file under the broker's data dir (embedded mode);
an etcd keyspace will keep them in etcd with Gazette's key layout (cluster mode).
Both give the same ``KeySpace`` interface::

    ks = LocalKeySpace(Path("herald-data"))
    rev = ks.apply([Change.upsert(spec, expect_mod_revision=0)])
    ks.get("example/journal").mod_revision == rev
"""

from herald.keyspace.base import Change, Entry, KeySpace
from herald.keyspace.local import LocalKeySpace

__all__ = ["Change", "Entry", "KeySpace", "LocalKeySpace"]
