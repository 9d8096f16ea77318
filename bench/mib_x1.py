"""1 MiB appends from one writer against the disk's own write+fdatasync loop, with
the broker's CPU per MiB and the time from a body's last byte to its answer (not
in ``make bench``; the code under test is whichever ``herald`` PYTHONPATH picks).

    python -m bench.mib_x1 [SECONDS] [ROUNDS] [WRITERS]

Each round runs the disk loop, then ``wrk -c1`` with 1 MiB PUTs, then a raw client
that sends all of a body but its last byte, lets the broker take it in, and times
the last byte to the answer (the part of an append that follows its body: the
syncs and the commit line; median and p90 of ``LAST_BYTE_SAMPLES``). ``WRITERS``
(default 1) sets wrk's connections, for the x4 case (still against the one-writer
disk loop, as the bench's headline; the last-byte client stays alone). Interleave
two trees' runs (A/B) for a comparison: wall figures are noisy on a shared machine,
CPU per MiB much less so.
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.append import _cpu_s
from bench.loadgen import run_wrk
from bench.references import fdatasync_loop, ndjson_body
from bench.servers import apply, bench_spec, herald_broker

__all__ = ["last_byte_ms", "main"]

MIB = 1 << 20
LAST_BYTE_SAMPLES = 60
#: How long the raw client lets the broker take in all but the last byte (the
#: pieces written and hashed): a probe's pause, not a synchronisation.
SETTLE_S = 0.01


def last_byte_ms(port: int, path: str, body: bytes, samples: int) -> list[float]:
    """Milliseconds from each body's last byte sent to its answer's first byte read."""
    head = (b"PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)))
    times = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            sock.sendall(head + body[:-1])
            time.sleep(SETTLE_S)  # wait-ok: a probe's pause (see SETTLE_S)
            started = time.perf_counter()
            sock.sendall(body[-1:])
            answer = sock.recv(65536)
            times.append((time.perf_counter() - started) * 1e3)
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(65536)
            if not answer.startswith(b"HTTP/1.1 2"):
                raise RuntimeError(f"append failed: {answer[:200]!r}")
            _drain_body(sock, answer)
    return times


def _drain_body(sock: socket.socket, answer: bytes) -> None:
    head, _, rest = answer.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        rest += sock.recv(65536)


def main(seconds: float = 5.0, rounds: int = 1, writers: int = 1) -> None:
    body = ndjson_body(MIB)
    print(f"load {os.getloadavg()[0]:.2f}  herald from {__import__('herald').__file__}")
    with tempfile.TemporaryDirectory(prefix="herald-mib-", dir=os.environ.get("MIB_DIR")) as tmp:
        scratch = Path(tmp)
        with herald_broker(scratch) as broker:
            apply(broker.url, bench_spec("bench/mib"))
            for _ in range(rounds):
                disk = fdatasync_loop(scratch, MIB, seconds)
                before = _cpu_s(broker.proc.pid)
                result = run_wrk(broker.url, ["/bench/mib"], body, writers, seconds)
                cpu = (_cpu_s(broker.proc.pid) - before) * 1e3 / max(result.requests, 1)
                herald = result.metrics(MIB)
                lb = sorted(last_byte_ms(broker.port, "/bench/mib", body, LAST_BYTE_SAMPLES))
                print(f"disk {disk['mb_per_s']:6.0f} MB/s  herald {herald['mb_per_s']:6.0f} MB/s "
                      f"ratio {herald['mb_per_s'] / disk['mb_per_s']:.2f}  p50 {herald['p50_ms']:.2f} ms  "
                      f"cpu {cpu:.2f} ms/MiB  last byte->answer p50 {statistics.median(lb):.2f} "
                      f"p90 {lb[int(len(lb) * 0.9)]:.2f} ms  load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main(*(float(arg) if i == 0 else int(arg) for i, arg in enumerate(sys.argv[1:])))
