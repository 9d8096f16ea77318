"""`WatchedList`: the journals a selector matches, kept current by a ``watch=true``
List stream in a background thread (Gazette's ``client.NewWatchedList``).

Publishers map messages onto ``watched.journals`` (sorted names, so modulo mapping
is stable for a fixed set); new partitions are picked up without a restart.

    watched = WatchedList(client, "app.gazette.dev/message-type=bike_share.Ride")
    watched.wait_ready(10)
    journal = modulo_mapping(key, watched.journals)
"""

from __future__ import annotations

import logging
import threading

import httpx
import orjson

from herald.client import _protocol as ops
from herald.client.broker import BrokerClient, _build
from herald.client.models import JournalInfo
from herald.client.transient import Backoff, is_transient
from herald.protocol.errors import HeraldError
from herald.protocol.labels import LabelSelector

__all__ = ["WatchedList"]

log = logging.getLogger(__name__)


class WatchedList:
    """The current List snapshot for ``selector``. The watch reconnects with backoff
    when the broker goes away; a non-transient error (a bad selector) stops it and
    is re-raised by `wait_ready` / `wait_for_change`."""

    def __init__(self, client: BrokerClient, selector: str | LabelSelector = "") -> None:
        self.client, self.selector = client, str(selector)
        self._cond = threading.Condition()
        self._infos: tuple[JournalInfo, ...] = ()
        self._version = 0  # snapshots received
        self._error: BaseException | None = None
        self._stopped = False
        self._backoff = Backoff()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"herald-watch:{self.selector}")
        self._thread.start()

    @property
    def infos(self) -> tuple[JournalInfo, ...]:
        return self._infos

    @property
    def journals(self) -> list[str]:
        """Names of the matched journals, sorted."""
        return [info.name for info in self._infos]

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """Block until the first snapshot arrived; False on timeout."""
        return self._wait(lambda: self._version > 0, timeout_s)

    def wait_for_change(self, timeout_s: float | None = None) -> bool:
        """Block until a snapshot newer than the current one arrives; False on timeout."""
        seen = self._version
        return self._wait(lambda: self._version > seen, timeout_s)

    def _wait(self, predicate, timeout_s: float | None) -> bool:
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate() or self._error is not None, timeout_s)
        if self._error is not None:
            raise self._error
        return bool(ok)

    def close(self) -> None:
        self._stopped = True
        self._backoff.cancel()
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> WatchedList:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stopped:
            try:
                self._watch_once()
            except (httpx.TransportError, HeraldError, orjson.JSONDecodeError) as err:
                if self._stopped:
                    return
                if isinstance(err, HeraldError) and not is_transient(err):
                    with self._cond:
                        self._error = err
                        self._cond.notify_all()
                    return
                log.warning("selector=%r watch failed (retrying): %s", self.selector, err)
            if not self._backoff.wait():
                return

    def _watch_once(self) -> None:
        http = self.client.http
        req = _build(http, ops.watch_request(self.selector), self.client._stream_timeout(True))
        self._response = resp = http.send(req, stream=True)
        try:
            if resp.status_code != 200:
                ops.raise_for_error(ops.Response(resp.status_code, resp.headers, resp.read()))
            for line in resp.iter_lines():
                if line.strip():
                    self._update(ops.parse_list(orjson.loads(line)))
        finally:
            resp.close()

    def _update(self, infos: list[JournalInfo]) -> None:
        self._backoff.reset()
        with self._cond:
            self._infos = tuple(infos)
            self._version += 1
            self._cond.notify_all()
