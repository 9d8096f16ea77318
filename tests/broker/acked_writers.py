"""Writer threads that append to a journal through a fail-over and keep what was
acknowledged: the shared half of the cluster crash tests, which then check every
acknowledged byte is where its acknowledgement said."""

from __future__ import annotations

import threading
import time

import httpx

#: Clean, retryable refusals while a route changes; anything else is a failure.
RETRYABLE = (421, 503)


class AckedWriters:
    """``count`` threads appending ``"<prefix>writer N record I\\n"`` to ``url`` until
    stopped; ``acked`` holds each acknowledged (begin offset, body)."""

    def __init__(self, url: str, count: int = 1) -> None:
        self.url = url
        self.acked: list[tuple[int, bytes]] = []
        self.unexpected: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(n,)) for n in range(count)]

    def __enter__(self) -> AckedWriters:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _write(self, n: int) -> None:
        with httpx.Client(timeout=30) as http:
            i = 0
            while not self._stop.is_set():
                body = f"writer {n} record {i}\n".encode()
                resp = http.put(self.url, content=body)
                if resp.status_code != 204 and resp.status_code not in RETRYABLE:
                    self.unexpected.append(resp.text)
                    return
                if resp.status_code == 204:
                    self.acked.append((int(resp.headers["X-Commit-Begin"]), body))
                    i += 1

    def wait_for(self, count: int, deadline_s: float, what: str) -> None:
        """Until ``count`` appends in all were acknowledged (failing on an unexpected
        answer, or after ``deadline_s``)."""
        deadline = time.monotonic() + deadline_s
        while len(self.acked) < count:
            assert not self.unexpected, self.unexpected
            assert time.monotonic() < deadline, what
            time.sleep(0.02)  # wait-ok: observing the writer threads' progress
