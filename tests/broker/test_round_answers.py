"""Appends answered straight from their sync round (`SyncRounds.want`, `CalledAnswer`).

A journal's queued appends are taken by the broker-wide round as it opens and
answered in the round's completion callback, with no task or future per append.
These tests load one real broker from many writer threads on raw keep-alive
connections, so that rounds hold several journals' groups and many appends each,
and check what each writer learns against what the journal holds: every answer
names its own request's bytes, and the answered ranges tile the journal with
nothing else in it [I-APPEND-1, I-APPEND-3]. Also: a refused append in the middle
of such rounds fails alone and writes nothing [I-REG-1]; a client that closes its
connection with its request in a round leaves the others answered and its whole
body appended once [I-APPEND-2].
"""

from __future__ import annotations

import re
import threading

import httpx
import pytest

from herald.testing import BrokerProcess, apply_specs, journal_spec
from herald.testing.waiting import wait_until
from tests.broker.raw_http import connect, read_response

JOURNALS = [f"rounds/j{i}" for i in range(6)]
WRITERS = 24
APPENDS = 40


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    proc = BrokerProcess(tmp_path_factory.mktemp("round-answers")).start()
    apply_specs(proc.url, *(journal_spec(name) for name in JOURNALS + ["rounds/registers", "rounds/closing"]))
    yield proc
    proc.kill()


def put(journal: str, body: bytes, extra: bytes = b"") -> bytes:
    return (f"PUT /{journal} HTTP/1.1\r\nHost: x\r\n".encode() + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def body_of(writer: int, number: int) -> bytes:
    return b"w%02d-%04d-" % (writer, number) + b"x" * (7 * writer + number % 13) + b"\n"


def run_writers(count: int, work) -> list:
    """``work(writer)`` on ``count`` threads at once; each one's result, or its error."""
    results: list = [None] * count
    start = threading.Barrier(count)

    def run(writer: int) -> None:
        try:
            start.wait()
            results[writer] = work(writer)
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            results[writer] = err

    threads = [threading.Thread(target=run, args=(w,)) for w in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    return results


def content(url: str, journal: str) -> bytes:
    read = httpx.get(f"{url}/{journal}", timeout=30)
    read.raise_for_status()
    return read.content


def assert_tiled(data: bytes, answered: list[tuple[int, int, bytes]]) -> None:
    """Each answered range holds its own body, and the ranges cover ``data`` exactly."""
    offset = 0
    for begin, end, body in sorted(answered):
        assert begin == offset, f"a gap or overlap at {offset}: next answer begins at {begin}"
        assert data[begin:end] == body
        offset = end
    assert offset == len(data)


def test_many_writers_over_many_journals_learn_their_own_offsets(served):
    def work(writer: int) -> list[tuple[str, int, int, bytes]]:
        learned = []
        with connect(served.url) as sock:
            for number in range(APPENDS):
                journal, body = JOURNALS[(writer + number) % len(JOURNALS)], body_of(writer, number)
                sock.sendall(put(journal, body))
                answer = read_response(sock)
                assert answer is not None and answer.status == 204, answer
                begin, end = int(answer.headers["x-commit-begin"]), int(answer.headers["x-commit-end"])
                assert end - begin == len(body)
                assert int(answer.headers["x-write-head"]) >= end
                learned.append((journal, begin, end, body))
        return learned

    learned = [item for items in run_writers(WRITERS, work) for item in items]
    assert len(learned) == WRITERS * APPENDS
    for journal in JOURNALS:
        assert_tiled(content(served.url, journal), [(b, e, body) for j, b, e, body in learned if j == journal])


def test_a_refused_append_amid_round_answered_appends_fails_alone(served):
    """Writers whose register check fails (the gateway's path, refused as the round
    takes their journal's group) race plain appends to the same journal: each is
    refused with the gateway's 412 and writes nothing; every plain one commits."""
    journal = "rounds/registers"
    first = httpx.put(f"{served.url}/{journal}", content=b"first\n", headers={"X-Union-Registers": "owner=a"},
                      timeout=30)
    assert first.status_code == 204

    def work(writer: int) -> list[tuple[int, int, bytes]]:
        learned = []
        with connect(served.url) as sock:
            for number in range(APPENDS // 2):
                body = body_of(writer, number)
                refused = writer % 3 == 0
                sock.sendall(put(journal, body, b"X-Check-Registers: owner=b\r\n" if refused else b""))
                answer = read_response(sock)
                assert answer is not None
                if refused:
                    assert answer.status == 412, answer
                    assert answer.json()["status"] == "REGISTER_MISMATCH"
                    continue
                assert answer.status == 204, answer
                learned.append((int(answer.headers["x-commit-begin"]), int(answer.headers["x-commit-end"]), body))
        return learned

    learned = [item for items in run_writers(WRITERS, work) for item in items]
    assert len(learned) == (WRITERS - len(range(0, WRITERS, 3))) * (APPENDS // 2)
    assert_tiled(content(served.url, journal), [(0, len(b"first\n"), b"first\n"), *learned])


def test_a_connection_closed_with_its_append_in_a_round_leaves_the_others_answered(served):
    """Half the writers send each request and close at once, never reading the
    answer; the others keep appending and are all answered. A closed writer's
    whole body was received, so it is appended, once and whole."""
    journal = "rounds/closing"

    def work(writer: int) -> list[tuple[int, int, bytes]] | list[bytes]:
        if writer % 2:
            sent = []
            for number in range(APPENDS // 4):
                body = body_of(writer, number)
                with connect(served.url) as sock:
                    sock.sendall(put(journal, body))
                sent.append(body)
            return sent
        learned = []
        with connect(served.url) as sock:
            for number in range(APPENDS // 2):
                body = body_of(writer, number)
                sock.sendall(put(journal, body))
                answer = read_response(sock)
                assert answer is not None and answer.status == 204, answer
                learned.append((int(answer.headers["x-commit-begin"]), int(answer.headers["x-commit-end"]), body))
        return learned

    results = run_writers(WRITERS, work)
    answered = [item for r in results[0::2] for item in r]
    closed = [body for r in results[1::2] for body in r]
    # A closed writer's last request may still be on its way in: wait until the
    # journal holds every byte sent (then nothing more may arrive).
    total = sum(end - begin for begin, end, _ in answered) + sum(map(len, closed))
    def whole() -> bytes | None:
        data = content(served.url, journal)
        return data if len(data) >= total else None

    data = wait_until(whole, f"{total} bytes in {journal}")
    assert len(data) == total
    rest = bytearray(data)
    for begin, end, body in answered:
        assert data[begin:end] == body
        rest[begin:end] = b"\0" * (end - begin)
    leftover = bytes(rest).replace(b"\0", b"")
    lines = re.findall(rb"w\d\d-\d{4}-x*\n", leftover)
    assert b"".join(lines) == leftover, "something other than whole bodies in the journal"
    assert sorted(lines) == sorted(closed)


def test_appends_queued_past_one_group_go_to_the_next_rounds(tmp_path):
    """A round takes at most `MAX_GROUP_BYTES` of a journal's queue: the rest stays
    wanted, and later rounds take it, in order, until every append is answered."""
    import asyncio

    from herald.broker.journal import Journal
    from herald.broker.sync_rounds import rounds_of_running_loop
    from herald.protocol.journal import JournalSpec

    bodies = [b"append-%02d\n" % i for i in range(9)]

    async def scenario() -> tuple[list, int]:
        journal = await Journal.open(JournalSpec.from_dict(journal_spec("rounds/small-groups", stores=[])),
                                     tmp_path, [])
        journal.max_group_bytes = 20  # two 10-byte appends per group
        loop, answers = asyncio.get_running_loop(), []
        done = loop.create_future()

        def answer(outcome) -> None:
            answers.append(outcome)
            if len(answers) == len(bodies):
                done.set_result(None)

        try:
            await journal.append(b"")  # the journal's task starts, then parks: rounds take what follows
            # The task passes the gate once the round's gather times out (no writer comes
            # back): poll for it parked on its queue, with a deadline.
            deadline = loop.time() + 10
            while journal._queue is None or journal._queue._waiter is None:
                assert loop.time() < deadline, "the append task never parked"
                await asyncio.sleep(0.001)  # wait-ok: polling a condition, bounded
            for body in bodies:
                assert journal.append_nowait(body, answer)
            await asyncio.wait_for(done, 30)
            return answers, rounds_of_running_loop().rounds
        finally:
            await journal.close()

    answers, rounds = asyncio.run(scenario())
    assert [(a.begin, a.end) for a in answers] == [(10 * i, 10 * i + 10) for i in range(9)]
    assert rounds == 1 + 5  # the first append's, then ceil(9 / 2) groups, one per round
