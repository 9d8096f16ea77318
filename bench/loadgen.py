"""Load generators: `wrk` (a C tool) for Herald's HTTP appends, and a lean asyncio
closed-loop driver speaking NATS, RESP (Redis) and HTTP/1.1 over raw sockets for
the references (and as a cross-check of Herald with the same client).

Both are *closed loops*: each connection keeps ``depth`` requests in flight and
sends the next when a reply arrives, for a bounded time. 32 concurrent writers =
32 connections × depth 1. Both report requests/s and p50/p99 latency.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoadResult", "http_put", "nats_js_publish", "redis_xadd", "run_closed_loop", "run_wrk"]

DRAIN_DEADLINE_S = 30.0

WRK_SCRIPT = r"""
-- Requests are built once in init (wrk.headers has the Host header only by then)
-- and handed out round-robin over BENCH_PATHS, so no body is copied per request.
local reqs = {}
local i = 0
function init(args)
  local f = io.open(os.getenv("BENCH_BODY"), "rb")
  local body = f:read("*a")
  f:close()
  local headers = {}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  headers["Content-Type"] = "application/octet-stream"
  for p in string.gmatch(os.getenv("BENCH_PATHS"), "[^,]+") do
    table.insert(reqs, wrk.format("PUT", p, headers, body))
  end
end
request = function()
  i = i + 1
  return reqs[(i % #reqs) + 1]
end
"""


@dataclass(frozen=True, slots=True)
class LoadResult:
    requests: int
    errors: int
    elapsed_s: float
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s else 0.0

    def metrics(self, body_bytes: int, items_per_request: int = 1) -> dict[str, float]:
        """The figures a benchmark records: appends/s, MB/s (10^6 bytes), latency."""
        return {"appends_per_s": self.rate * items_per_request,
                "mb_per_s": self.rate * body_bytes / 1e6,
                "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "errors": float(self.errors)}


# -- wrk --------------------------------------------------------------------------------------

_UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not m:
        raise ValueError(f"unparsable wrk latency {text!r}")
    return float(m.group(1)) * _UNITS_MS[m.group(2)]


def parse_wrk(out: str) -> LoadResult:
    """Requests, errors, duration and the p50/p99 of ``wrk --latency`` output."""
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m),", out)
    if not m:
        raise RuntimeError(f"wrk printed no totals:\n{out}")
    requests, elapsed = int(m.group(1)), _ms(m.group(2) + m.group(3)) / 1e3
    pct = dict(re.findall(r"^\s+(50|99)(?:\.0+)?%\s+(\S+)$", out, re.MULTILINE))
    errors = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if sock:
        errors += sum(int(x) for x in sock.groups())
    return LoadResult(requests, errors, elapsed, _ms(pct.get("50", "0us")), _ms(pct.get("99", "0us")))


def run_wrk(base_url: str, paths: Sequence[str], body: bytes, connections: int, duration_s: float,
            threads: int | None = None) -> LoadResult:
    """PUT ``body`` round-robin to ``paths`` from ``connections`` connections for
    ``duration_s`` (bounded: wrk stops itself; we kill it after a grace period)."""
    threads = threads or min(connections, 2)
    with tempfile.TemporaryDirectory(prefix="herald-bench-wrk-") as tmp:
        script, body_file = Path(tmp, "put.lua"), Path(tmp, "body")
        script.write_text(WRK_SCRIPT)
        body_file.write_bytes(body)
        env = {**os.environ, "BENCH_BODY": str(body_file), "BENCH_PATHS": ",".join(paths)}
        cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration_s))}s", "--latency",
               "--timeout", "20s", "-s", str(script), base_url]
        out = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True, timeout=duration_s + 60)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr}")
    return parse_wrk(out.stdout)


# -- raw closed-loop driver -------------------------------------------------------------------

# A protocol: ``lane(i) -> (preamble, request)`` gives connection i the bytes to send
# once and the request to repeat; ``parse(buf) -> (consumed, replies, errors,
# bytes_to_answer)`` counts complete replies (in request order per connection).
Parser = Callable[[bytearray], tuple[int, int, int, bytes]]


@dataclass(frozen=True, slots=True)
class Protocol:
    lane: Callable[[int], tuple[bytes, bytes]]
    parse: Parser
    name: str


class _Lane(asyncio.Protocol):
    """One connection keeping ``depth`` requests in flight until ``stop`` is set."""

    def __init__(self, proto: Protocol, index: int, depth: int, run: _Run) -> None:
        self.proto, self.depth, self.run = proto, depth, run
        self.preamble, self.request = proto.lane(index)
        self.buf = bytearray()
        self.sent_at: deque[float] = deque()
        self.transport: asyncio.Transport | None = None
        self.idle = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        transport.write(self.preamble)
        for _ in range(self.depth):
            self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.sent_at.append(time.perf_counter())
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        consumed, replies, errors, answer = self.proto.parse(self.buf)
        if consumed:
            del self.buf[:consumed]
        if answer and self.transport is not None:
            self.transport.write(answer)
        now = time.perf_counter()
        for _ in range(replies):
            self.run.latencies.append(now - self.sent_at.popleft())
            if not self.run.stopped:
                self._send()
        self.run.errors += errors
        self.run.replies += replies
        if self.run.stopped and not self.sent_at and not self.idle.done():
            self.idle.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.idle.done():
            self.idle.set_result(None)


class _Run:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.replies = 0
        self.errors = 0
        self.stopped = False


async def _closed_loop(host: str, port: int, proto: Protocol, connections: int, depth: int,
                       duration_s: float) -> LoadResult:
    loop = asyncio.get_running_loop()
    run = _Run()
    lanes = []
    for i in range(connections):
        _, lane = await loop.create_connection(lambda i=i: _Lane(proto, i, depth, run), host, port)
        lanes.append(lane)
    start = time.perf_counter()
    await asyncio.sleep(duration_s)  # wait-ok: the timed window itself.
    run.stopped = True
    await asyncio.wait_for(asyncio.gather(*(lane.idle for lane in lanes)), DRAIN_DEADLINE_S)
    elapsed = time.perf_counter() - start
    for lane in lanes:
        lane.transport.close()
    lat = sorted(run.latencies)
    p50 = statistics.median(lat) * 1e3 if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else 0.0
    return LoadResult(run.replies, run.errors, elapsed, p50, p99)


def run_closed_loop(port: int, proto: Protocol, connections: int, duration_s: float, depth: int = 1,
                    host: str = "127.0.0.1") -> LoadResult:
    """Drive ``proto`` at ``host:port`` for ``duration_s`` (then drain in-flight replies)."""
    return asyncio.run(_closed_loop(host, port, proto, connections, depth, duration_s))


# -- protocols --------------------------------------------------------------------------------


def _nats_parse(buf: bytearray) -> tuple[int, int, int, bytes]:
    pos = replies = errors = 0
    answer = b""
    n = len(buf)
    while pos < n:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            break
        if buf.startswith(b"MSG ", pos):
            size = int(buf[buf.rfind(b" ", pos, eol) + 1:eol])
            end = eol + 2 + size + 2
            if end > n:
                break
            if buf.find(b'"error"', eol, end) >= 0:
                errors += 1
            replies += 1
            pos = end
            continue
        if buf.startswith(b"PING", pos):
            answer += b"PONG\r\n"
        elif buf.startswith(b"-ERR", pos):
            raise RuntimeError(f"nats: {bytes(buf[pos:eol])!r}")
        pos = eol + 2
    return pos, replies, errors, answer


def nats_js_publish(subject: str, payload: bytes) -> Protocol:
    """JetStream publish: a PUB with a reply inbox (one per connection); the
    stream's ack, sent once the message is stored, is the reply."""
    def lane(i: int) -> tuple[bytes, bytes]:
        inbox = b"_INBOX.bench.%d" % i
        preamble = (b'CONNECT {"verbose":false,"pedantic":false,"headers":false,"protocol":1,'
                    b'"lang":"python-bench","version":"0"}\r\nSUB %s 1\r\n' % inbox)
        head = b"PUB %s %s %d\r\n" % (subject.encode(), inbox, len(payload))
        return preamble, head + payload + b"\r\n"
    return Protocol(lane, _nats_parse, "nats")


def _resp_parse(buf: bytearray) -> tuple[int, int, int, bytes]:
    pos = replies = errors = 0
    n = len(buf)
    while pos < n:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            break
        kind = buf[pos]
        if kind == 0x24:  # '$' bulk string
            end = eol + 2 + int(buf[pos + 1:eol]) + 2
            if end > n:
                break
            pos = end
        else:
            errors += kind == 0x2D  # '-'
            pos = eol + 2
        replies += 1
    return pos, replies, errors, b""


def _resp(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def redis_xadd(key: str, payload: bytes, maxlen: int) -> Protocol:
    """``XADD key MAXLEN ~ n * data <payload>`` (trimmed so memory stays bounded)."""
    request = _resp(b"XADD", key.encode(), b"MAXLEN", b"~", str(maxlen).encode(), b"*", b"data", payload)
    return Protocol(lambda i: (b"", request), _resp_parse, "redis")


def _http_parse(buf: bytearray) -> tuple[int, int, int, bytes]:
    pos = replies = errors = 0
    while True:
        head_end = buf.find(b"\r\n\r\n", pos)
        if head_end < 0:
            break
        head = bytes(buf[pos:head_end]).lower()
        m = re.search(rb"\r\ncontent-length: *(\d+)", head)
        end = head_end + 4 + (int(m.group(1)) if m else 0)
        if end > len(buf):
            break
        errors += not head.startswith(b"http/1.1 2")
        replies += 1
        pos = end
    return pos, replies, errors, b""


def http_put(path: str, body: bytes) -> Protocol:
    request = (b"PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
               b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body))) + body
    return Protocol(lambda i: (b"", request), _http_parse, "http")
