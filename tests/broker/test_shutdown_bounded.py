"""[I-RESTART-1] SIGTERM stops a broker in bounded time whatever its clients and stores
do, and an expected disconnect is never logged as an error."""

from __future__ import annotations

import socket
import time

import httpx

from herald.broker.server import STOP_DEADLINE_S
from herald.testing import seed_journal

NAME = "stuck/journal"
# SIGTERM→exit may take STOP_DEADLINE_S (the bound on a graceful stop) plus process
# exit: the interpreter's own shutdown, on a busy machine. A bound, not a timing.
EXIT_MARGIN_S = 5.0


def open_stuck_clients(url: str) -> list[socket.socket]:
    """Half-sent bodies, half-sent headers, blocking reads and list watches."""
    host, port = url.removeprefix("http://").split(":")
    requests = [
        f"PUT /{NAME} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial".encode(),
        f"PUT /{NAME} HTTP/1.1\r\nHo".encode(),
        f"GET /{NAME}?block=true&offset=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
        b'POST /v1/journals/list HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{"watch":true}',
    ]
    socks = []
    for _ in range(8):
        for request in requests:
            sock = socket.create_connection((host, int(port)))
            sock.sendall(request)
            socks.append(sock)
    return socks


def sabotage_store(proc) -> None:
    """Make the journal's file-store directory a plain file: every upload now fails."""
    store_dir = proc.file_root / NAME
    if store_dir.exists():
        for child in store_dir.iterdir():
            child.unlink()
        store_dir.rmdir()
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    store_dir.write_bytes(b"not a directory")


def test_sigterm_with_stuck_clients_and_a_failing_store_exits_in_bounded_time(broker):
    seed_journal(broker, NAME)
    sabotage_store(broker)
    socks = open_stuck_clients(broker.url)
    # Every blocking read has its headers: the broker is serving them all right now.
    for sock in socks[2::4]:
        assert sock.recv(12).startswith(b"HTTP/1.1 2")

    signalled = time.monotonic()
    rc = broker.terminate(timeout_s=STOP_DEADLINE_S + 15)
    took_s = time.monotonic() - signalled

    assert rc == 0
    assert took_s < STOP_DEADLINE_S + EXIT_MARGIN_S, f"SIGTERM to exit took {took_s:.1f} s"
    print(f"SIGTERM to exit: {took_s:.1f} s (bound {STOP_DEADLINE_S + EXIT_MARGIN_S:.0f} s)")
    log = "".join(broker.stderr_lines)
    assert "Traceback" not in log and " ERROR " not in log
    for sock in socks:
        sock.close()
    (broker.file_root / NAME).unlink()
    broker.start()
    with httpx.Client(base_url=broker.url, timeout=30) as http:  # the spool was recovered
        assert http.get(f"/{NAME}").content == b"seed\n"


def test_a_client_gone_mid_body_is_not_an_error(broker):
    seed_journal(broker, NAME)
    for sock in open_stuck_clients(broker.url):
        sock.close()
    with broker.client() as http:  # the broker served on, and wrote nothing partial
        assert http.put(f"/{NAME}", content=b"next\n").headers["X-Commit-Begin"] == "5"
        assert http.get(f"/{NAME}").content == b"seed\nnext\n"
    assert broker.terminate() == 0
    log = "".join(broker.stderr_lines)
    assert "Traceback" not in log and " ERROR " not in log and "never awaited" not in log
