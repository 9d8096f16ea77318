"""Large appends streamed into the spool as their body arrives (herald.broker.append_stream).

Against a real broker process: a streamed body cut short or late appends nothing and
the next append lands where it would have [I-APPEND-2]; small appends racing a
streamed one never interleave with it [I-APPEND-1]; ``kill -9`` mid-stream loses no
acknowledged byte and keeps none of the unfinished body [I-FRAG-2]. Each test checks
the broker's ``herald_broker_streamed_appends_total`` counter, so that the streamed
path (not the buffered fallback) is the one exercised; a journal's first append
creates its spool's files, and goes the buffered way (`seeded`).
"""

from __future__ import annotations

import hashlib
import re
import socket

import httpx

from herald.fragment.spool_recycling import FREE_SUFFIX, KEPT_DIR
from herald.testing import apply_specs, journal_spec, wait_until
from tests.broker.raw_http import connect, dribble_until_closed, parse, read_response

#: Larger than the streaming threshold (256 KiB) and than a socket read.
BIG = 300 << 10


def seeded(proc, journal: str, **fragment) -> bytes:
    """Create ``journal`` and append a first small record (the spool's files are
    created by the buffered path; streams write into existing ones)."""
    apply_specs(proc.url, journal_spec(journal, **fragment))
    append(proc, journal, b"seed\n")
    return b"seed\n"


def body(tag: str, size: int = BIG) -> bytes:
    line = f"{tag} {'x' * 50}\n".encode()
    return (line * (size // len(line) + 1))[:size]


def head(journal: str, length: int) -> bytes:
    return f"PUT /{journal} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()


def streamed(proc, outcome: str) -> int:
    text = httpx.get(f"{proc.url}/metrics", timeout=30).text
    found = re.search(rf'herald_broker_streamed_appends_total{{outcome="{outcome}"}} (\S+)', text)
    return int(float(found[1])) if found else 0


def content(proc, journal: str) -> bytes:
    read = httpx.get(f"{proc.url}/{journal}", timeout=30)
    return read.content if read.status_code == 206 else b""


def append(proc, journal: str, data: bytes) -> httpx.Response:
    answer = httpx.put(f"{proc.url}/{journal}", content=data, timeout=30)
    assert answer.status_code == 204, answer.text
    return answer


def read_204s(sock: socket.socket, count: int) -> list:
    """``count`` pipelined answers, each a 204 (a head and no body)."""
    raw = b""
    sock.settimeout(30)
    while raw.count(b"\r\n\r\n") < count:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {raw!r}"
        raw += chunk
    return [parse(answer + b"\r\n\r\n") for answer in raw.split(b"\r\n\r\n")[:count]]


def cut_mid_body(proc, journal: str, data: bytes) -> None:
    """Send the head and half of ``data``, then reset the connection."""
    with connect(proc.url) as sock:
        sock.sendall(head(journal, len(data)) + data[:len(data) // 2])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def test_a_streamed_append_answers_as_a_buffered_one(broker):
    seed = seeded(broker, "stream/whole")
    data = body("whole")
    answer = append(broker, "stream/whole", data)
    assert answer.headers["X-Commit-Begin"] == str(len(seed))
    assert answer.headers["X-Commit-End"] == str(len(seed + data))
    assert answer.headers["X-Commit-SHA1-Sum"] == hashlib.sha1(data).hexdigest()
    assert content(broker, "stream/whole") == seed + data
    assert streamed(broker, "committed") == 1


def test_a_streamed_body_cut_short_appends_nothing_and_is_written_over(broker):
    first = seeded(broker, "stream/cut", length=8 << 20) + body("first")
    append(broker, "stream/cut", first[5:])
    cut_mid_body(broker, "stream/cut", body("lost"))
    # Queued behind the cut body until the broker sees the reset, then at its offset.
    after = body("after")
    answer = append(broker, "stream/cut", after)
    assert answer.headers["X-Commit-Begin"] == str(len(first))
    assert answer.headers["X-Commit-SHA1-Sum"] == hashlib.sha1(after).hexdigest()
    assert content(broker, "stream/cut") == first + after
    assert streamed(broker, "abandoned") == 1
    broker.kill()  # the spool's sums verify over the bytes written over the lost body
    broker.start()
    assert content(broker, "stream/cut") == first + after


def test_a_streamed_body_late_past_the_body_timeout_gets_408_and_appends_nothing(broker_factory):
    proc = broker_factory(None, None, "--body-timeout", "1s")
    seed = seeded(proc, "stream/late")
    data = body("late")
    with connect(proc.url) as sock:
        sock.sendall(head("stream/late", len(data)) + data[:len(data) // 2])
        received = dribble_until_closed(sock, b"y", every_s=0.2, deadline_s=15)
    answer = parse(received)
    assert answer is not None and answer.status == 408, received[:300]
    assert answer.json()["status"] == "REQUEST_TIMEOUT" and answer.json()["field"] == "body"
    assert answer.headers["connection"] == "close"
    assert streamed(proc, "abandoned") == 1
    assert content(proc, "stream/late") == b"seed\n"
    assert append(proc, "stream/late", b"next\n").headers["X-Commit-Begin"] == str(len(seed))


def test_small_appends_racing_a_streamed_one_never_interleave(broker):
    """[I-APPEND-1] the small appends sent while a streamed body is half-way wait for
    it: every append's range holds exactly its own bytes, and none overlaps another."""
    seed = seeded(broker, "stream/race", length=8 << 20)
    big = body("big")
    small = [f"small {i}\n".encode() for i in range(20)]
    with connect(broker.url) as streaming:
        streaming.sendall(head("stream/race", len(big)) + big[:len(big) // 2])
        racers = [connect(broker.url) for _ in range(4)]
        try:
            for i, racer in enumerate(racers):  # pipelined, all sent before the big body ends
                racer.sendall(b"".join(head("stream/race", len(s)) + s for s in small[i::4]))
            streaming.sendall(big[len(big) // 2:])
            answers = [(big, read_response(streaming))]
            for i, racer in enumerate(racers):
                answers += zip(small[i::4], read_204s(racer, len(small[i::4])))
        finally:
            for racer in racers:
                racer.close()
    ranges = [(0, len(seed), seed)]
    for data, answer in answers:
        assert answer is not None and answer.status == 204
        begin, end = int(answer.headers["x-commit-begin"]), int(answer.headers["x-commit-end"])
        assert end - begin == len(data)
        ranges.append((begin, end, data))
    ranges.sort()
    whole = content(broker, "stream/race")
    assert [r[:2] for r in ranges] == list(zip([0] + [r[1] for r in ranges[:-1]], [r[1] for r in ranges]))
    for begin, end, data in ranges:
        assert whole[begin:end] == data
    # Streamed whole, or yielded to the small ones if it took longer than YIELD_AFTER_S.
    assert streamed(broker, "committed") + streamed(broker, "yielded") == 1


def test_a_stalled_streamed_body_yields_its_journal_to_queued_appends(broker):
    """A small append queued behind a body that stopped half-way is answered while
    that body is still incomplete; the body, once whole, lands after it, intact."""
    seed = seeded(broker, "stream/yield", length=8 << 20)
    big = body("stalled")
    with connect(broker.url) as streaming:
        streaming.sendall(head("stream/yield", len(big)) + big[:len(big) // 2])
        small = append(broker, "stream/yield", b"small\n")  # would wait for the body timeout
        assert small.headers["X-Commit-Begin"] == str(len(seed))
        streaming.sendall(big[len(big) // 2:])
        answer = read_response(streaming)
    assert answer is not None and answer.status == 204
    assert answer.headers["x-commit-begin"] == small.headers["X-Commit-End"]
    assert answer.headers["x-commit-sha1-sum"] == hashlib.sha1(big).hexdigest()
    assert content(broker, "stream/yield") == seed + b"small\n" + big
    assert streamed(broker, "yielded") == 1 and streamed(broker, "committed") == 0


def test_kill_9_mid_stream_loses_no_acknowledged_byte(broker):
    """[I-FRAG-2] streamed appends acknowledged before a kill -9 all survive it; the
    body that was half-way when the broker died is not there, and the next append
    lands right after the acknowledged bytes."""
    acked = seeded(broker, "stream/crash", length=8 << 20)
    for i in range(3):
        data = body(f"acked {i}")
        append(broker, "stream/crash", data)
        acked += data
    with connect(broker.url) as sock:
        sock.sendall(head("stream/crash", BIG) + body("unfinished")[:BIG // 2])
        httpx.get(f"{broker.url}/healthz", timeout=30)  # the half body is the broker's by now
        assert streamed(broker, "committed") == 3
        broker.kill()
    broker.start()
    assert content(broker, "stream/crash") == acked
    assert append(broker, "stream/crash", b"after\n").headers["X-Commit-Begin"] == str(len(acked))
    assert content(broker, "stream/crash") == acked + b"after\n"


def persisted(proc, journal: str) -> int:
    text = httpx.get(f"{proc.url}/metrics", timeout=30).text
    found = re.search(rf'herald_broker_persisted_fragments_total{{journal="{journal}"}} (\S+)', text)
    return int(float(found[1])) if found else 0


def test_persisted_spool_files_are_reused_and_their_old_bytes_never_read(broker):
    """Each append fills a fragment, so the next rolls; a persisted spool's file is
    kept and becomes the next spool's (herald.fragment.spool_recycling). Reads, and a
    recovery after kill -9, see exactly the acknowledged bytes, none of the old ones."""
    journal = "stream/reuse"
    acked = seeded(broker, journal)  # 1 MiB fragments
    for i in range(4):
        data = body(f"reuse {i}", 1_200_000)
        append(broker, journal, data)
        acked += data
        wait_until(lambda n=i: persisted(broker, journal) >= n, f"fragment {i} persisted")
    kept = list((broker.data_dir / "spools" / KEPT_DIR).glob(f"*{FREE_SUFFIX}"))
    assert len(kept) == 1  # the last persisted spool's, the others reused
    assert content(broker, journal) == acked
    broker.kill()
    broker.start()
    assert content(broker, journal) == acked
    assert append(broker, journal, b"after\n").headers["X-Commit-Begin"] == str(len(acked))
    assert content(broker, journal) == acked + b"after\n"
