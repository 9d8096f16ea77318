"""The floor under "1 KiB appends, 1 writer": what any Python server reaches there.

``python -m bench.x1_floor [ROUNDS [SECONDS]]`` takes turns, as `bench.append`'s
x1 case does, between the disk's write+fdatasync loop (`fdatasync_loop`) and two
trivial uvloop servers driven by the same ``wrk -c1`` load as Herald: one that
answers each ``PUT`` with a canned 204 at once (the round trip alone: wrk, the
loopback socket, the wake-ups, the loop), and one that first writes the body into
a preallocated file and fdatasyncs it (Herald's commit log does the same, with
framing, hashing and bookkeeping on top). The second's ratio to the disk loop is
the most the x1 headline can show on this machine with this client; Herald's
own distance from it is what its Python costs. Not in ``make bench``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.loadgen import run_wrk
from bench.references import fdatasync_loop, ndjson_body

_SERVER = r'''
import asyncio, os, sys, uvloop
sync, path = sys.argv[1] == "1", sys.argv[2]
ANSWER = (b"HTTP/1.1 204 No Content\r\nX-Commit-Begin: 0\r\nX-Commit-End: 1024\r\n"
          b"X-Commit-SHA1-Sum: 0000000000000000000000000000000000000000\r\nX-Write-Head: 1024\r\n"
          b"X-Registers: \r\nDate: Sat, 28 Nov 2026 09:00:00 GMT\r\nServer: floor\r\n\r\n")
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(fd, bytes(256 << 20), 0)
os.fsync(fd)
pos = 0
class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        global pos
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            at = self.buffer.find(b"Content-Length: ", 0, end) + 16
            size = int(self.buffer[at:self.buffer.find(b"\r\n", at)])
            if len(self.buffer) < end + 4 + size:
                return
            body, self.buffer = self.buffer[end + 4:end + 4 + size], self.buffer[end + 4 + size:]
            if sync:
                os.pwrite(fd, body, pos)
                pos += len(body)
                os.fdatasync(fd)
            self.transport.write(ANSWER)
async def main():
    server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
'''


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    body = ndjson_body(1 << 10)
    with tempfile.TemporaryDirectory(prefix="herald-x1-floor-") as scratch:
        servers = {name: subprocess.Popen([sys.executable, "-c", _SERVER, sync, str(Path(scratch, name))],
                                          stdout=subprocess.PIPE, text=True)
                   for name, sync in (("answer only", "0"), ("write+fdatasync", "1"))}
        try:
            urls = {name: f"http://127.0.0.1:{proc.stdout.readline().strip()}"  # type: ignore[union-attr]
                    for name, proc in servers.items()}
            ratios: dict[str, list[float]] = {name: [] for name in urls}
            for _ in range(rounds):
                disk = fdatasync_loop(Path(scratch), len(body), seconds)["appends_per_s"]
                line = [f"load {os.getloadavg()[0]:.1f}", f"disk loop {disk:,.0f}/s"]
                for name, url in urls.items():
                    result = run_wrk(url, ["/x"], body, 1, seconds)
                    rate = result.requests / result.elapsed_s
                    ratios[name].append(rate / disk)
                    line.append(f"{name} {rate:,.0f}/s ({rate / disk:.2f}x, p50 {result.p50_ms * 1e3:.0f} us)")
                print("; ".join(line), flush=True)
            print("median ratio to the disk loop: " + ", ".join(
                f"{name} {statistics.median(values):.2f}" for name, values in ratios.items()))
        finally:
            for proc in servers.values():
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
