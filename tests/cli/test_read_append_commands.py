"""``herald journals append|read|fragments|prune`` as in the tutorial's "Gazctl",
"Fragments" and bike-share sections, against a real broker."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import defaultdict

import pytest
import yaml

from herald.message.mapping import modulo_mapping, rendezvous_mapping
from herald.testing import journal_spec, wait_until
from tests.cli.cli_helpers import DEADLINE_S, herald, ok, spawn, table


def apply(url: str, *specs: dict) -> None:
    ok(url, "apply", input=yaml.safe_dump_all(list(specs)))


def read_line(stream, deadline_s: float = DEADLINE_S) -> bytes:
    """One line from a subprocess pipe, failing loudly after a deadline."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(deadline_s)
    assert got, "no line in time"
    return got[0]


def collect_lines(stream) -> list[bytes]:
    """Lines of a subprocess pipe, gathered by a thread as they arrive."""
    lines: list[bytes] = []
    threading.Thread(target=lambda: lines.extend(iter(stream.readline, b"")), daemon=True).start()
    return lines


def test_append_then_read_as_in_the_gazctl_section(broker):
    apply(broker.url, journal_spec("example/journal"))
    ok(broker.url, "append", "-l", "name=example/journal", input='{"Msg": "Hello, Gazctl!"}\n')
    assert ok(broker.url, "read", "-l", "name=example/journal") == '{"Msg": "Hello, Gazctl!"}\n'


def test_read_block_streams_and_tail_starts_at_the_write_head(broker):
    apply(broker.url, journal_spec("example/journal"))
    ok(broker.url, "append", "-l", "name=example/journal", input='{"Msg": "old"}\n')
    block = spawn(broker.url, "read", "-l", "name=example/journal", "--block")
    tail = spawn(broker.url, "read", "-l", "name=example/journal", "--tail", "--block", "--log.level=debug")
    try:
        assert read_line(block.stdout) == b'{"Msg": "old"}\n'
        # The tail reader logs once its read is positioned at the write head.
        logged = collect_lines(tail.stderr)
        wait_until(lambda: any(b"read is ready" in line for line in logged), "the tail read to open")
        ok(broker.url, "append", "-l", "name=example/journal", input='{"Msg": "new"}\n')
        assert read_line(tail.stdout) == b'{"Msg": "new"}\n'
        assert read_line(block.stdout) == b'{"Msg": "new"}\n'
    finally:
        block.kill()
        tail.kill()


def test_streaming_lines_append_commits_each_line_as_it_arrives(broker):
    apply(broker.url, journal_spec("example/journal"))
    writer = spawn(broker.url, "append", "-l", "name=example/journal", "--framing=lines",
                   stdin=subprocess.PIPE)
    reader = spawn(broker.url, "read", "-l", "name=example/journal", "--block")
    try:
        for i in range(3):  # the tutorial's `while true; do echo …; done | gazctl … append`.
            line = b'{"Msg": "tick %d"}\n' % i
            writer.stdin.write(line)
            writer.stdin.flush()
            assert read_line(reader.stdout) == line
        writer.stdin.close()
        assert writer.wait(DEADLINE_S) == 0
    finally:
        writer.kill()
        reader.kill()


def test_read_of_several_journals_gives_each_in_turn(broker):
    apply(broker.url, journal_spec("multi/a"), journal_spec("multi/b"))
    ok(broker.url, "append", "-l", "name=multi/a", input="a1\na2\n")
    ok(broker.url, "append", "-l", "name=multi/b", input="b1\n")
    assert ok(broker.url, "read", "-l", "prefix=multi/") == "a1\na2\nb1\n"
    assert ok(broker.url, "read", "-l", "prefix=multi/", "--offset", "3") == "a2\n"
    assert ok(broker.url, "read", "-l", "prefix=multi/", "--tail") == ""


RIDES = [f"examples/bike-share/rides/part-00{i}" for i in range(4)]


@pytest.mark.parametrize("mapping, choose", [("modulo", modulo_mapping), ("rendezvous", rendezvous_mapping)])
def test_keyed_lines_append_routes_each_record_by_the_key_line_before_it(broker, mapping, choose):
    rides = [dict(journal_spec(name), labels=[{"name": "content-type", "value": "text/csv"},
                                              {"name": "app.gazette.dev/message-type", "value": "bike_share.Ride"}])
             for name in RIDES]
    apply(broker.url, *rides)
    records = [(str(1000 + i % 37), f"uuid-{i},2019-09-01,{1000 + i % 37}\n") for i in range(300)]
    # awk -F "," '{print $13}{print}': the key alone on a line, then the record.
    stdin = "".join(f"{key}\n{record}" for key, record in records)
    ok(broker.url, "append", "-l", "app.gazette.dev/message-type=bike_share.Ride", "--framing=lines",
       f"--mapping={mapping}", input=stdin)
    expected = defaultdict(str)
    for key, record in records:
        expected[choose(key.encode(), RIDES)] += record
    assert len(expected) > 1
    for journal in RIDES:
        got = ok(broker.url, "read", "-l", f"name={journal}") if expected[journal] else ""
        assert got == expected[journal]


def test_keyed_append_without_a_record_after_the_last_key_fails(broker):
    apply(broker.url, journal_spec("a/keyed"))
    result = herald(broker.url, "append", "-l", "name=a/keyed", "--framing=lines", "--mapping=modulo",
                    input="k1\nrecord\nk2\n")
    assert result.exit_code == 1 and "key line without its record" in str(result.exception)


def test_random_lines_append_spreads_whole_lines_over_the_partitions(broker):
    apply(broker.url, *(journal_spec(name) for name in RIDES))
    lines = [f"line {i}\n" for i in range(400)]
    ok(broker.url, "append", "-l", "prefix=examples/bike-share/rides/", "--framing=lines", input="".join(lines))
    parts = [ok(broker.url, "read", "-l", f"name={j}") for j in RIDES]
    assert sorted(line for part in parts for line in part.splitlines(keepends=True)) == sorted(lines)
    assert len([p for p in parts if p]) > 1


def fill_fragments(url: str, journal: str, blocks: int) -> None:
    for i in range(blocks):
        ok(url, "append", "-l", f"name={journal}", input="".join(f'{{"i": {i}, "j": {j}}}\n' for j in range(100)))


def persisted(url: str, journal: str, *args: str) -> list[dict]:
    frags = json.loads(ok(url, "fragments", "-l", f"name={journal}", "-o", "json", *args))
    return [f for f in frags if f["fragment"]["backing_store"]]


def test_fragments_table_and_signed_urls(broker):
    apply(broker.url, journal_spec("example/journal", length=1024))
    fill_fragments(broker.url, "example/journal", 4)
    wait_until(lambda: len(persisted(broker.url, "example/journal")) >= 3, "3 persisted fragments")
    rows = table(ok(broker.url, "fragments", "-l", "name=example/journal"))
    assert rows[0] == ["JOURNAL", "OFFSET", "LENGTH", "PERSISTED", "SHA1", "COMPRESSION"]
    assert [r[0] for r in rows[1:]] == ["example/journal"] * 4
    assert rows[1][1] == "0" and rows[1][2].endswith("KiB") and rows[1][-1] == "SNAPPY"
    assert rows[1][3].endswith("ago") or rows[1][3] == "now"
    assert rows[-1][3].endswith("...")  # the spool: not persisted, so no PERSISTED cell.
    signed = persisted(broker.url, "example/journal", "--url-ttl", "1m")
    assert all(f["signed_url"].startswith("file://") for f in signed)
    assert not any("signed_url" in f for f in persisted(broker.url, "example/journal"))
    with_url = table(ok(broker.url, "fragments", "-l", "name=example/journal", "--url-ttl", "1m"))
    assert with_url[0][-1] == "URL" and with_url[1][-1].startswith("file://")


def test_prune_deletes_only_fragments_older_than_retention(broker):
    apply(broker.url, journal_spec("old/kept", length=1024, refresh_interval="1s"),
          journal_spec("old/pruned", length=1024, refresh_interval="1s", retention="1h0m0s"))
    for journal in ("old/kept", "old/pruned"):
        fill_fragments(broker.url, journal, 3)
        wait_until(lambda j=journal: len(persisted(broker.url, j)) >= 2, f"{journal} persisted")
        two_hours_ago = time.time() - 7200
        for path in (broker.file_root / journal).iterdir():
            os.utime(path, (two_hours_ago, two_hours_ago))
    wait_until(lambda: all(f["fragment"]["mod_time"] < time.time() - 3600
                           for f in persisted(broker.url, "old/pruned")), "the store listing to refresh")

    dry = json.loads(ok(broker.url, "prune", "-l", "prefix=old/", "--dry-run", "-o", "json"))
    assert dry["dry_run"] and {f["journal"] for f in dry["removed"]} == {"old/pruned"}
    assert len(dry["removed"]) == len(persisted(broker.url, "old/pruned"))

    result = herald(broker.url, "prune", "-l", "prefix=old/")
    assert result.exit_code == 0 and f"pruned {len(dry['removed'])} fragments" in result.stderr
    pruned_ends = max(f["end"] for f in dry["removed"])  # what is left is the spool, persisted next
    left = [p.name for p in (broker.file_root / "old/pruned").iterdir() if not p.name.startswith(".")]
    assert all(int(name.split("-")[0], 16) >= pruned_ends for name in left)  # (".": an upload in flight)
    assert len(list((broker.file_root / "old/kept").iterdir())) >= 2  # retention 0 keeps all.
    assert all(f["fragment"]["begin"] >= pruned_ends for f in persisted(broker.url, "old/pruned"))
