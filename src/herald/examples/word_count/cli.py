"""``herald examples word-count …``: a real-time bigram language model with a query API.

    herald examples word-count setup --partitions 4
    herald examples word-count publish corpus/*.txt
    herald examples word-count run --checkpoint /tmp/wc [--trigger 2s]
    herald examples word-count serve --port 8090
    herald examples word-count query --prefix "the city"      # or: query "the city"

``python -m herald.examples.word_count.cli run …`` runs the job without the rest
of the CLI (the crash test runs the driver that way, in its own process group).
"""

from __future__ import annotations

import asyncio
import re
from importlib.resources import files

import typer

from herald.cli import config
from herald.cli.options import BROKER, LOG_LEVEL, OUTPUT, broker_client, command
from herald.cli.output import OutputFormat, print_doc, print_table
from herald.examples.word_count.journals import COUNTS_SELECTOR, DOCS_SELECTOR
from herald.examples.word_count.query import DEFAULT_SERVICE
from herald.protocol.errors import HeraldError, Status, ValidationError

app = typer.Typer(help="a real-time bigram language model with a query API.", no_args_is_help=True)

SERVICE = typer.Option(DEFAULT_SERVICE, "--service", envvar="HERALD_WORD_COUNT_SERVICE",
                       help="Address of the word-count query service.")


@app.callback()
def word_count() -> None:
    """a real-time bigram language model with a query API."""


@app.command("setup")
@command
def setup_command(
    partitions: int = typer.Option(4, "--partitions", help="Document journals (and as many count journals)."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Create word-count/docs/part-NNN and word-count/counts/part-NNN (those missing)."""
    from herald.examples.word_count.journals import ensure_journals

    with broker_client(broker) as client:
        created = ensure_journals(client, partitions)
    print(f"created {len(created)} journals" + (f": {', '.join(created)}" if created else " (all exist)"))


@app.command("corpus")
def corpus_command() -> None:
    """Print the paths of the shipped public-domain corpus (for `publish $(… corpus)`)."""
    root = files("herald.examples.word_count") / "corpus"
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".txt"):
            print(entry)


@app.command("publish")
@command
def publish_command(
    paths: list[str] = typer.Argument(..., metavar="FILE…", help="UTF-8 text files, one document each."),
    selector: str = typer.Option(DOCS_SELECTOR, "--to", help="Selector of the document journals."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Publish each file as one document (all are checked first: a file that is not
    UTF-8 stops the command, naming the file and byte offset, and nothing is published)."""
    from herald.examples.word_count.documents import publish_documents, read_documents

    documents = read_documents(paths)
    with broker_client(broker) as client:
        stats = publish_documents(client, selector, documents)
    print(f"published {stats.documents} documents ({stats.text_bytes:,} bytes of text) in {stats.elapsed_s:.2f} s")


@app.command("run")
@command
def run_command(
    checkpoint: str = typer.Option(..., "--checkpoint", help="Checkpoint directory (Spark's and Herald's)."),
    trigger: str = typer.Option("available-now", "--trigger", help="available-now, or an interval like 2s."),
    on_bad_document: str = typer.Option("fail", "--on-bad-document",
                                        help="fail: stop at a message that is not a document; skip: log and drop it."),
    max_bytes_per_trigger: int = typer.Option(0, "--max-bytes-per-trigger", help="Input bytes per batch (0 = all)."),
    input: str = typer.Option(DOCS_SELECTOR, "--input", help="Selector of the document journals."),
    output: str = typer.Option(COUNTS_SELECTOR, "--output", help="Selector of the count journals."),
    master: str = typer.Option("local[2]", "--master", help="Spark master."),
    partitions: int = typer.Option(2, "--partitions", help="State partitions (fixed by the first run)."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Count bigrams (RocksDB state) and publish each changed count exactly once."""
    from herald.examples.word_count.job import WordCountSettings, run_word_count
    from herald.pipelines.streaming import parse_trigger, spark_session

    trigger_s = parse_trigger(trigger)
    settings = WordCountSettings(broker=config.resolve_broker_address(broker), checkpoint=checkpoint,
                                 input=input, output=output, trigger=trigger_s, on_bad_document=on_bad_document,
                                 max_bytes_per_trigger=max_bytes_per_trigger)
    spark = spark_session(master, partitions)
    # The query's failure is reported below as one line; Spark's own log of it is a
    # page of JVM and Python traces on stderr.
    spark.sparkContext.setLogLevel("FATAL")
    try:
        batches = run_word_count(spark, settings, report=lambda line: print(line, flush=True))
    except Exception as err:  # noqa: BLE001 — the query's failure, from the JVM: one line, not a trace.
        raise _query_error(err) from None
    print(f"done: {batches} batches", flush=True)


_BAD_DOCUMENT = re.compile(r"offset \d+: journal \S+: not a document: [^\n]*")


def _query_error(err: Exception) -> HeraldError:
    """The streaming query's failure as one line: a bad document's journal and offset
    (raised in an executor, it reaches the driver as text inside Spark's error)."""
    if isinstance(err, HeraldError):
        return err
    found = _BAD_DOCUMENT.search(str(err))
    if found:
        return HeraldError(Status.MESSAGE_DECODE_ERROR, found.group(0))
    decode = re.search(r"offset \d+: journal \S+: [^\n]*on-decode-error[^\n]*", str(err))
    if decode:
        return HeraldError(Status.MESSAGE_DECODE_ERROR, decode.group(0))
    first = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
    return HeraldError(Status.INTERNAL, f"the word-count query failed: {first[:500]}")


@app.command("serve")
@command
def serve_command(
    port: int = typer.Option(8090, "--port", help="Port to bind; 0 picks a free one (printed when ready)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    counts: str = typer.Option(COUNTS_SELECTOR, "--counts", help="Selector of the count journals."),
    broker: str = BROKER,
    log_level: str = LOG_LEVEL,
) -> None:
    """Answer bigram and prefix queries over HTTP from the job's published counts."""
    from herald.examples.word_count.service import ServiceSettings, serve

    settings = ServiceSettings(broker=config.resolve_broker_address(broker), counts=counts, host=host, port=port)
    try:
        asyncio.run(serve(settings, ready=lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        pass


@app.command("query")
@command
def query_command(
    bigram: str = typer.Argument(None, metavar="[BIGRAM]", help="Two words, e.g. 'the city'."),
    prefix: str = typer.Option(None, "--prefix", show_default=False,
                              help="All bigrams starting with this text [default: none: give a BIGRAM]."),
    limit: int = typer.Option(100, "--limit", help="At most this many bigrams for --prefix."),
    fmt: OutputFormat = OUTPUT,
    service: str = SERVICE,
    log_level: str = LOG_LEVEL,
) -> None:
    """The count of one bigram, or every bigram with a prefix."""
    from herald.examples.word_count.query import query_bigram, query_prefix
    from herald.examples.word_count.tokens import split_bigram

    if (bigram is None) == (prefix is None):
        raise ValidationError("BIGRAM", "give either a bigram ('the city') or --prefix, not both or neither")
    if bigram is not None:
        doc = query_bigram(service, *split_bigram(bigram, "BIGRAM"))
        rows = [[doc["bigram"], doc["count"]]]
    else:
        doc = query_prefix(service, prefix, limit)
        rows = [[b["bigram"], b["count"]] for b in doc["bigrams"]]
    if fmt is not OutputFormat.table:
        print_doc(doc, fmt)
        return
    print_table(["BIGRAM", "COUNT"], rows)
    if doc.get("truncated"):
        print(f"(first {limit} shown: raise --limit for more)")


if __name__ == "__main__":
    from herald.cli.main import run

    run(app)
