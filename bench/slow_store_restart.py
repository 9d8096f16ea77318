"""How long a broker restarted over N journals on a slow S3 endpoint refuses appends.

A journal takes no append until its store has been listed (gazette-facts §8.2), so
after a restart every journal's first listing must answer before it is writable.
This starts moto's S3 server behind a TCP proxy that holds each request
``--delay-ms`` before passing it on (a distant or loaded endpoint), an embedded
broker with N journals on that store, kills it (-9) and starts it again, then
appends one record to every journal until each is accepted: the figure is the
time from the restart until the last journal took its append.

    PYTHONPATH=src python bench/slow_store_restart.py --journals 1000 --delay-ms 100

Run it with another ``PYTHONPATH`` for an A/B against another checkout (the broker
process inherits it). Not part of ``python -m bench``: it needs moto and minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from herald.testing import BrokerProcess
from herald.testing.s3 import MotoS3

WRITERS = 16
APPLY_BATCH = 100


class DelayProxy:
    """A TCP proxy that holds every chunk a client sends ``delay_s`` before passing it
    upstream: each request answers at least ``delay_s`` late."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self._target, self._delay_s = ("127.0.0.1", target_port), delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            threading.Thread(target=self._pump, args=(client, upstream, self._delay_s), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, 0.0), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, delay_s: float) -> None:
        try:
            while data := src.recv(65536):
                if delay_s:
                    time.sleep(delay_s)  # the latency under test, not a synchronisation
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._listener.close()


def spec(name: str, store: str) -> dict:
    return {"name": name, "replication": 1,
            "labels": [{"name": "content-type", "value": "application/x-ndjson"}],
            "fragment": {"length": 1 << 20, "compression_codec": "SNAPPY", "stores": [store],
                         "refresh_interval": "5m0s"}}


def append_until_all_accepted(url: str, names: list[str], deadline_s: float) -> tuple[float, int]:
    """Seconds until every journal took one append, and how many appends were refused."""
    started, refused = time.perf_counter(), 0
    pending = list(names)
    with httpx.Client(base_url=url, timeout=60,
                      limits=httpx.Limits(max_connections=WRITERS)) as http, ThreadPoolExecutor(WRITERS) as pool:
        while pending:
            if time.perf_counter() - started > deadline_s:
                raise SystemExit(f"{len(pending)} journals still refused appends after {deadline_s}s")
            codes = list(pool.map(lambda n: http.put(f"/{n}", content=b'{"n": 1}\n').status_code, pending))
            refused += sum(code != 204 for code in codes)
            pending = [n for n, code in zip(pending, codes) if code != 204]
            if pending:
                time.sleep(0.05)  # a client's retry pause
    return time.perf_counter() - started, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journals", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=1, help="restarts measured over the same journals")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="herald-slow-store-"))
    s3 = MotoS3(work / "s3").start()
    proxy = DelayProxy(s3.port, args.delay_ms / 1000)
    broker = BrokerProcess(work / "data", env=s3.env)
    try:
        broker.start()
        store = s3.store_url("fragments").replace(s3.endpoint, proxy.endpoint)
        names = [f"slow/j{i:05d}" for i in range(args.journals)]
        for i in range(0, len(names), APPLY_BATCH):
            changes = [{"upsert": spec(n, store), "expect_mod_revision": -1} for n in names[i:i + APPLY_BATCH]]
            httpx.post(f"{broker.url}/v1/journals/apply", json={"changes": changes},
                       timeout=600).raise_for_status()
        append_until_all_accepted(broker.url, names, 600)
        for _ in range(args.runs):
            broker.kill()
            restarted = time.perf_counter()
            broker.start()
            ready_s = time.perf_counter() - restarted
            writable_s, refused = append_until_all_accepted(broker.url, names, 600)
            print(json.dumps({"journals": args.journals, "delay_ms": args.delay_ms, "ready_s": round(ready_s, 2),
                              "all_writable_s": round(ready_s + writable_s, 2), "refused_appends": refused,
                              "load": os.getloadavg()[0]}), flush=True)
    finally:
        broker.kill()
        proxy.close()
        s3.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
