"""Raw-socket HTTP for tests that must send what no HTTP client library would."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass

DEADLINE_S = 15.0


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=DEADLINE_S)
    return sock


def read_until_closed(sock: socket.socket, deadline_s: float = DEADLINE_S) -> bytes:
    """Everything the broker sends until it closes; fails if it has not closed by the deadline."""
    sock.settimeout(deadline_s)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the broker did not close the connection within {deadline_s}s") from None
    return out


def parse(raw: bytes) -> RawResponse | None:
    """The first response in ``raw`` (None if the broker closed without answering)."""
    if not raw:
        return None
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(rest)))
    return RawResponse(int(lines[0].split()[1]), headers, rest[:length])


def read_response(sock: socket.socket, deadline_s: float = DEADLINE_S) -> RawResponse | None:
    """The next whole response (by its Content-Length), or None if the broker closes first."""
    sock.settimeout(deadline_s)
    raw = b""
    try:
        while True:
            response = parse(raw) if b"\r\n\r\n" in raw else None
            if response is not None and _is_whole(raw, response):
                return response
            chunk = sock.recv(65536)
            if not chunk:
                return response
            raw += chunk
    except ConnectionResetError:
        return parse(raw) if b"\r\n\r\n" in raw else None
    except TimeoutError:
        raise AssertionError(f"no response within {deadline_s}s (got {raw[:200]!r})") from None


def _is_whole(raw: bytes, response: RawResponse) -> bool:
    if "content-length" not in response.headers:
        return response.status in (204, 304) or 100 <= response.status < 200
    return len(raw.partition(b"\r\n\r\n")[2]) >= int(response.headers["content-length"])


def exchange(url: str, request: bytes, deadline_s: float = DEADLINE_S) -> RawResponse | None:
    """Send ``request`` whole and read the first answer (None: closed without one)."""
    with connect(url) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was read: the answer may still be there
        return read_response(sock, deadline_s)


def dribble_until_closed(sock: socket.socket, byte: bytes, every_s: float, deadline_s: float) -> bytes:
    """A slow client: send ``byte`` every ``every_s`` until the broker closes the
    connection (returning what it sent back), failing after ``deadline_s``.

    Each wait is a blocking read that returns the moment the broker answers or
    closes; its timeout is only the dribble cadence.
    """
    received, give_up = b"", time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        try:
            sock.sendall(byte)
        except (BrokenPipeError, ConnectionResetError):
            return received + read_until_closed(sock, 1.0)
        sock.settimeout(every_s)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"a slow client held its connection for over {deadline_s}s")
