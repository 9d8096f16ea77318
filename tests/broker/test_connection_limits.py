"""Per-connection limits: a slow or idle client cannot hold a broker's connection,
memory or request slot past its limit (``--idle-timeout``, ``--body-timeout``,
``--max-header-bytes``), while blocking reads outlive the idle timeout."""

from __future__ import annotations

import httpx
import pytest

from herald.testing import seed_journal
from tests.broker.raw_http import connect, dribble_until_closed, exchange, parse, read_response, read_until_closed

NAME = "slow/journal"
IDLE_S, BODY_S = 1.0, 1.0
#: How long past its limit a connection may live before the test fails.
GRACE_S = 10.0


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    from herald.testing import BrokerProcess

    proc = BrokerProcess(tmp_path_factory.mktemp("limits"), None, "--idle-timeout", f"{IDLE_S:g}s",
                         "--body-timeout", f"{BODY_S:g}s", "--max-header-bytes", "1024").start()
    seed_journal(proc, NAME)
    yield proc
    proc.kill()


def content(proc) -> bytes:
    return httpx.get(f"{proc.url}/{NAME}", timeout=30).content


def test_a_client_dribbling_its_headers_is_disconnected(limited):
    with connect(limited.url) as sock:
        sock.sendall(f"PUT /{NAME} HTTP/1.1\r\nHost: x\r\nX-Slow: ".encode())
        received = dribble_until_closed(sock, b"a", every_s=0.2, deadline_s=IDLE_S + GRACE_S)
    assert received == b""  # never a request, so never an answer
    assert content(limited) == b"seed\n"


def test_a_client_dribbling_its_body_gets_408_appends_nothing_and_is_disconnected(limited):
    with connect(limited.url) as sock:
        sock.sendall(f"PUT /{NAME} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n".encode())
        received = dribble_until_closed(sock, b"x" * 10, every_s=0.2, deadline_s=BODY_S + GRACE_S)
    response = parse(received)
    assert response is not None and response.status == 408, received[:300]
    assert response.json()["status"] == "REQUEST_TIMEOUT" and response.json()["field"] == "body"
    assert content(limited) == b"seed\n"


def test_a_dribbled_control_api_body_is_cut_off_too(limited):
    with connect(limited.url) as sock:
        sock.sendall(b"POST /v1/journals/apply HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        received = dribble_until_closed(sock, b"1\r\n{\r\n", every_s=0.2, deadline_s=BODY_S + GRACE_S)
    assert parse(received).status == 408


def test_an_idle_keep_alive_connection_is_closed(limited):
    with connect(limited.url) as sock:
        sock.sendall(f"HEAD /{NAME} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert read_response(sock).status == 200
        assert read_until_closed(sock, IDLE_S + GRACE_S) == b""  # fails if still open then


def test_a_connection_that_never_sends_anything_is_closed(limited):
    with connect(limited.url) as sock:
        assert read_until_closed(sock, IDLE_S + GRACE_S) == b""


def test_headers_past_the_limit_are_a_400(limited):
    response = exchange(limited.url, f"PUT /{NAME} HTTP/1.1\r\nHost: x\r\nX-Check-Registers: {'a' * 2000}"
                                     "\r\nContent-Length: 3\r\n\r\nabc".encode())
    assert response.status == 400
    assert content(limited) == b"seed\n"
    assert not any("Traceback" in line for line in limited.stderr_lines)


def test_a_blocking_read_outlives_the_idle_timeout(limited):
    """The idle timeout is for connections with no request in progress: a long-poll
    read (or a list watch) waiting for appends is never cut by it."""
    seed_journal(limited, "slow/blocking")
    with connect(limited.url) as sock:
        sock.sendall(b"GET /slow/blocking?offset=5&block=true HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(GRACE_S)
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 206")
        sock.settimeout(3 * IDLE_S)
        with pytest.raises(TimeoutError):  # nothing to read, and not closed, past the limit
            sock.recv(65536)
        httpx.put(f"{limited.url}/slow/blocking", content=b"late\n", timeout=30).raise_for_status()
        sock.settimeout(GRACE_S)
        assert b"late\n" in sock.recv(65536)


def test_limits_are_flags_with_env_vars(broker_factory):
    proc = broker_factory(None, None, env={"HERALD_BROKER_IDLE_TIMEOUT": "1s"})
    with connect(proc.url) as sock:
        assert read_until_closed(sock, 1.0 + GRACE_S) == b""
