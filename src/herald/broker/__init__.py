"""The asyncio broker: journals, the append pipeline, reads, HTTP gateway and /v1 API.

Nothing imports this package but ``herald serve`` (tests run it as a process)::

    herald serve --port 0 --data-dir /tmp/d   # prints: herald broker listening on http://127.0.0.1:PORT
"""

from herald.broker.server import serve
from herald.broker.settings import BrokerSettings

__all__ = ["BrokerSettings", "serve"]
