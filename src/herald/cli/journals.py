"""``herald journals …``: list, apply, edit, read, append, fragments, prune (gazctl's equal).

Every command of the seed tutorial works with ``herald`` in place of ``gazctl``:

    herald journals list -l prefix=foobar/ -L content-type --primary
    herald journals list -o yaml | herald journals apply
    herald journals append -l name=example/journal --framing=lines
    herald journals read -l name=example/journal --block --tail
    herald journals fragments -l name=example/journal --url-ttl 1m
    herald journals prune -l prefix=examples/ --dry-run

The broker is ``--broker``, else ``$BROKER_ADDRESS``, else the config file, else
``http://localhost:8080`` (`herald.cli.config`). Errors exit 1 with one line.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer
import yaml

from herald.cli.editing import edit_until_applied
from herald.cli.options import BROKER, LOG_LEVEL, OUTPUT, broker_client, command, selector_option
from herald.cli.output import OutputFormat, humanize_age, humanize_bytes, print_doc, print_table, progress, table_header
from herald.cli.reading import Offsets, matched, read_committed_journals, read_journals
from herald.client import AppendService, BrokerClient, FragmentInfo, JournalInfo, WatchedList
from herald.client.transient import retry_transient
from herald.keyspace.base import BLIND, Change
from herald.message.mapping import NoJournalsError, mapping_by_name
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.journal import parse_duration
from herald.protocol.journalspace import hoist, push_down

log = logging.getLogger(__name__)

journals_app = typer.Typer(no_args_is_help=True, help="Work with journals and their specs.")

LIST_READY_TIMEOUT_S = 30.0

# -- list / apply / edit ----------------------------------------------------------------------


def journals_yaml(infos: list[JournalInfo]) -> str:
    """The hierarchical YAML of ``infos`` (hoisted, with revisions), as `apply` takes it."""
    if not infos:
        return ""
    return yaml.safe_dump(hoist((i.spec, i.mod_revision) for i in infos), sort_keys=False)


@journals_app.command("list")
@command
def list_command(
    selector: str = selector_option(False),
    label_columns: list[str] = typer.Option([], "-L", "--label-columns",
                                        help="Show this label as a column (repeatable) [default: none]."),
    primary: bool = typer.Option(False, "--primary", help="Show each journal's primary broker."),
    output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """List journals matching a selector; -o yaml prints specs that `apply` takes back."""
    with broker_client(broker) as client:
        infos = client.list(selector)
    if output is OutputFormat.yaml:
        sys.stdout.write(journals_yaml(infos))
    elif output is OutputFormat.json:
        print_doc([i.to_dict() for i in infos], output)
    else:
        headers = ["NAME", *map(table_header, label_columns)] + (["PRIMARY"] if primary else [])
        rows = [[i.name, *(",".join(i.spec.labels.values_of(lb)) or "<none>" for lb in label_columns)]
                + ([i.primary] if primary else []) for i in infos]
        print_table(headers, rows)


def changes_from_yaml(text: str) -> list[Change]:
    """Flatten every YAML document (a spec, a ``children`` tree, or a list of them)
    into apply changes; ``revision`` becomes ``expect_mod_revision`` (0 = create)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ValidationError("specs", f"invalid YAML: {err}") from None
    changes = []
    for doc in docs:
        for tree in doc if isinstance(doc, list) else [doc]:
            for spec, revision, delete in push_down(tree):
                changes.append(Change(revision or BLIND, delete=spec.name) if delete
                               else Change(revision, upsert=spec))
    if not changes:
        raise ValidationError("specs", "no JournalSpecs given")
    return changes


def _print_applied(revision: int, output: OutputFormat) -> None:
    if output is OutputFormat.table:
        print(f"successfully applied revision={revision}")
    else:
        print_doc({"revision": revision}, output)


def _read_specs_file(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ValidationError("-f", f"{path}: no such file; give a YAML file of JournalSpecs, "
                                    "or '-' to read them from stdin") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValidationError("-f", f"cannot read {path} ({getattr(err, 'strerror', None) or err})") from None


@journals_app.command("apply")
@command
def apply_command(
    specs: str = typer.Option("-", "-f", "--specs", help="YAML file of JournalSpecs ('-' = stdin)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the changes; apply nothing."),
    max_txn_size: int = typer.Option(0, "--max-txn-size", min=0,
                                     help="Apply in chunks of at most N changes (for etcd's per-transaction "
                                          "limit, 128 by default). Not atomic across chunks. 0: one change."),
    output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Apply JournalSpecs (flat or hierarchical YAML) in one atomic change (gazctl's
    --max-txn-size splits a large apply, as gazctl does)."""
    text = sys.stdin.read() if specs == "-" else _read_specs_file(Path(specs))
    changes = changes_from_yaml(text)
    if dry_run:
        print_doc({"dry_run": True, "changes": [c.to_dict() for c in changes]},
                  OutputFormat.json if output is OutputFormat.json else OutputFormat.yaml)
        return
    size = max_txn_size or len(changes)
    with broker_client(broker) as client:
        revision = 0
        for start in range(0, len(changes), size):
            revision = client.apply(changes[start:start + size])
        _print_applied(revision, output)


@journals_app.command("edit")
@command
def edit_command(
    selector: str = selector_option(True),
    output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """List matching specs, open them in $VISUAL/$EDITOR, apply what you save; after an
    error the editor reopens on your text with the error on top (kubectl edit)."""
    with broker_client(broker) as client:
        original = journals_yaml(matched(client, selector))
        revision = edit_until_applied(original, lambda text: client.apply(changes_from_yaml(text)))
    if revision is None:
        print("Edit cancelled, no changes made.")
    else:
        _print_applied(revision, output)


# -- read -------------------------------------------------------------------------------------


@journals_app.command("read")
@command
def read_command(
    selector: str = selector_option(True),
    block: bool = typer.Option(False, "--block", help="Keep reading at the write head (until interrupted)."),
    tail: bool = typer.Option(False, "--tail", help="Start at the write head (offset -1)."),
    offset: int = typer.Option(0, "--offset", min=0, help="Start at this offset of each journal."),
    end_offset: int = typer.Option(0, "--end-offset", min=0,
                                   help="Stop before this offset of each journal (0: no end)."),
    offsets_file: Path = typer.Option(None, "--offsets-file", show_default=False,
                                      help="JSON {journal: offset}: start there (else --offset/--tail) and "
                                           "save the next offsets back when the read ends, to resume "
                                           "[default: none]."),
    offload: bool = typer.Option(False, "--offload", help="Read persisted fragments straight from their stores."),
    committed: bool = typer.Option(False, "--committed",
                                   help="Read-committed: each committed message once, ACKs hidden."),
    on_decode_error: str = typer.Option("fail", "--on-decode-error",
                                        help="With --committed: fail on a message the journal's framing "
                                             "cannot decode (naming journal and offset), or skip and count it."),
    broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Copy journal content to stdout: each matching journal in turn, whole appends."""
    if committed and (offsets_file or end_offset):
        raise ValidationError("--committed", "reads each journal whole; drop --offsets-file/--end-offset "
                                             "(a committed read needs the sequencer state from offset 0)")
    offsets = Offsets(offsets_file)
    with broker_client(broker) as client:
        names = [i.name for i in matched(client, selector)]
        if committed:
            read_committed_journals(client, names, block, on_decode_error)
            return
        read_journals(client, names, -1 if tail else offset, end_offset, block, offload, offsets)


# -- append -----------------------------------------------------------------------------------

#: How long ``--framing none`` retries a transient refusal (a fail-over takes seconds).
APPEND_RETRY_DEADLINE_S = 60.0


def keyed_records(lines: Iterator[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """``(key, record)`` from alternating lines: a key alone on a line, then its record
    (the seed's ``awk '{print $13}{print}'`` pipeline)."""
    for key in lines:
        record = next(lines, None)
        if record is None:
            raise ValidationError("stdin", "input ended after a key line without its record")
        yield key.rstrip(b"\r\n"), record


def _mapper(mapping: str, watched: WatchedList) -> Callable[[bytes], str]:
    choose = mapping_by_name(mapping, random.Random(), "--mapping")
    return lambda key: choose(key, watched.journals)


def _append_lines(client: BrokerClient, watched: WatchedList, mapping: str) -> None:
    stdin = sys.stdin.buffer
    lines = iter(stdin.readline, b"")
    pairs = keyed_records(lines) if mapping != "random" else ((b"", line) for line in lines)
    choose, failures = _mapper(mapping, watched), []

    def note_failure(future: Any) -> None:
        if future.exception() is not None:
            failures.append(future.exception())

    with AppendService(client) as service, progress("append") as bar:
        for key, record in pairs:
            if not record.endswith(b"\n"):
                record += b"\n"
            future = service.append(choose(key), record)
            future.add_done_callback(note_failure)
            bar.advance(len(record))
            if failures:
                break
    log.info("appended %s", service.statistics())
    if failures:
        raise failures[0]


@journals_app.command("append")
@command
def append_command(
    selector: str = selector_option(True),
    framing: str = typer.Option("none", "--framing", help="none (stdin is one append) or lines."),
    mapping: str = typer.Option("random", "--mapping", help="random, modulo or rendezvous (lines only)."),
    broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Append stdin to journals matching the selector. With --framing lines each line
    is a record; modulo/rendezvous take each record's key from the line before it."""
    if framing not in ("none", "lines"):
        raise ValidationError("framing", f"must be none or lines ({framing!r})")
    mapping_by_name(mapping, random.Random(), "mapping")  # validates the name
    if framing == "none" and mapping != "random":
        raise ValidationError("mapping", f"--mapping {mapping} needs --framing lines (a key line per record)")
    with broker_client(broker) as client, WatchedList(client, selector) as watched:
        if not watched.wait_ready(LIST_READY_TIMEOUT_S):
            raise HeraldError(Status.INTERNAL, "the broker did not answer the journal list in time")
        if not watched.journals:
            raise NoJournalsError()
        if framing == "lines":
            _append_lines(client, watched, mapping)
            return
        content = sys.stdin.buffer.read()
        if content:
            journal = mapping_by_name("random", random.Random())(b"", watched.journals)
            # A fail-over refuses appends (503) for seconds; retried as AppendService retries
            # --framing lines, so both framings ride out the same faults.
            result = retry_transient(lambda: client.append(journal, content), APPEND_RETRY_DEADLINE_S, "append")
            log.info("appended begin=%d end=%d", result.begin, result.end)


# -- fragments / prune --------------------------------------------------------------------------


def _fragment_rows(infos: list[FragmentInfo], now: float, with_url: bool) -> list[list[str]]:
    rows = []
    for info in infos:
        f = info.fragment
        row = [f.journal, str(f.begin), humanize_bytes(f.size),
               humanize_age(now - f.mod_time) if f.mod_time else "", f.sum[:12] + "...", f.codec.name]
        rows.append(row + ([info.signed_url or ""] if with_url else []))
    return rows


FRAGMENT_HEADERS = ["JOURNAL", "OFFSET", "LENGTH", "PERSISTED", "SHA1", "COMPRESSION"]


@journals_app.command("fragments")
@command
def fragments_command(
    selector: str = selector_option(True),
    url_ttl: str = typer.Option("", "--url-ttl", help="Sign a URL per persisted fragment, valid this long (e.g. 1m) "
                                                     "[default: no URLs]."),
    output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """List the fragments of matching journals (with signed URLs for batch readers)."""
    ttl_s = parse_duration(url_ttl, "url-ttl") if url_ttl else 0
    with broker_client(broker) as client:
        infos = [f for j in matched(client, selector) for f in client.fragments(j.name, signature_ttl_s=ttl_s)]
    if output is not OutputFormat.table:
        print_doc([f.to_dict() for f in infos], output)
        return
    print_table(FRAGMENT_HEADERS + (["URL"] if ttl_s else []), _fragment_rows(infos, time.time(), bool(ttl_s)))


@journals_app.command("prune")
@command
def prune_command(
    selector: str = selector_option(True),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be deleted; delete nothing."),
    output: OutputFormat = OUTPUT, broker: str = BROKER, log_level: str = LOG_LEVEL,
) -> None:
    """Delete persisted fragments older than each journal's fragment.retention
    (retention <= 0 keeps everything)."""
    with broker_client(broker) as client:
        removed = [f for j in matched(client, selector) for f in client.prune(j.name, dry_run=dry_run)]
    if output is not OutputFormat.table:
        print_doc({"dry_run": dry_run, "removed": [f.fragment.to_dict() for f in removed]}, output)
        return
    if removed:
        print_table(FRAGMENT_HEADERS, _fragment_rows(removed, time.time(), False))
    size = sum(f.fragment.size for f in removed)
    verb = "would prune" if dry_run else "pruned"
    print(f"{verb} {len(removed)} fragments ({humanize_bytes(size)})", file=sys.stderr)
