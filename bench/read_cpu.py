"""CPU per MiB of a SNAPPY read through the broker: the broker's and the client's.

``python -m bench.read_cpu [MiB] [rounds]`` starts one broker, fills a SNAPPY
journal (default 128 MiB), then alternates rounds of: Herald's client reading it
all through the broker, and the direct read+decompress+CRC of the same files.
Per round it prints the client's CPU (this process), the broker's (its
``/proc/<pid>/stat``), both per MiB of content, and the MB/s. CPU per MiB is far
less sensitive to a shared machine's neighbours than MB/s. Herald's client asks
for the stored chunks (`herald.broker.encoded_read`), so the decode is in the
client's figure and the broker's is mostly a ``sendfile``. Not in ``make bench``:
a probe for A/B runs (``PYTHONPATH=<checkout>/src``), each checkout in turn.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.read import APPEND_BYTES, FRAGMENT_BYTES, _fill_fragments, _journal
from bench.read_paths import direct_snappy, herald_read
from herald.testing.broker import BrokerProcess

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(mib: int = 128, rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory(prefix="read-cpu-") as scratch:
        broker = BrokerProcess(Path(scratch) / "data", Path(scratch) / "fragments",
                               env={"HERALD_LOG_LEVEL": "warning"})
        broker.extra_args += ["--log.level", "warning"]
        broker.start()
        try:
            assert broker.proc is not None
            end, paths = _fill_fragments(broker.url, "SNAPPY", mib << 20, broker.file_root)
            journal, size = _journal("SNAPPY"), end / (1 << 20)
            print(f"{end} bytes in {len(paths)} fragments; load {os.getloadavg()[0]:.2f}")
            for _ in range(rounds):
                b0, c0, f0, t0 = _cpu_s(broker.proc.pid), time.process_time(), _faults(), os.times()
                rate = herald_read(broker.url, journal, end, offload=False)["mb_per_s"]
                b1, c1, f1, t1 = _cpu_s(broker.proc.pid), time.process_time(), _faults(), os.times()
                direct = direct_snappy(paths, end, FRAGMENT_BYTES + APPEND_BYTES, check_crc=True)["mb_per_s"]
                print(f"client {1e3 * (c1 - c0) / size:.3f} ms/MiB (sys {1e3 * (t1.system - t0.system) / size:.3f})  "
                      f"broker {1e3 * (b1 - b0) / size:.3f} ms/MiB  faults/MiB {(f1 - f0) / size:.0f}  "
                      f"{rate:.0f} MB/s  direct {direct:.0f} MB/s  ratio {rate / direct:.2f}  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        finally:
            broker.kill()


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
