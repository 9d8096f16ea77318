"""``herald serve``: run a broker. With no flags, one embedded broker on 127.0.0.1:8080."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
import uvloop

from herald.broker import BrokerSettings, serve
from herald.broker.settings import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_LONE_APPEND_BYTES,
    DEFAULT_MAX_APPEND_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
)
from herald.cli.logs import configure
from herald.cli.options import log_level_option
from herald.durable import make_durable_dirs
from herald.protocol.errors import ValidationError
from herald.protocol.journal import format_duration, parse_duration

#: The broker's event loop. uvloop by default: with appends gathered into sync rounds,
#: a broker's time goes to per-request loop work (callbacks, wake-ups from executor
#: threads, socket reads and writes), which libuv does in C.
EVENT_LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", "--broker.host", envvar="HERALD_BROKER_HOST",
                             help="Address to bind."),
    port: int = typer.Option(8080, "--port", "--broker.port", envvar="HERALD_BROKER_PORT",
                             help="Port to bind; 0 picks a free one (printed when ready)."),
    data_dir: Path = typer.Option(Path("herald-data"), "--data-dir", "--broker.data-dir",
                                  envvar="HERALD_BROKER_DATA_DIR",
                                  help="Local spools and the embedded keyspace."),
    file_root: Path = typer.Option(None, "--file-root", "--broker.file-root",
                                   envvar="HERALD_BROKER_FILE_ROOT",
                                   help="Where file:/// store URLs resolve [default: DATA_DIR/fragments]."),
    max_append_bytes: int = typer.Option(DEFAULT_MAX_APPEND_BYTES, "--max-append-bytes",
                                         "--broker.max-append-bytes",
                                         envvar="HERALD_BROKER_MAX_APPEND_BYTES",
                                         help="Largest accepted append (413 beyond)."),
    max_append_rate: int = typer.Option(0, "--max-append-rate", "--broker.max-append-rate", min=0,
                                        envvar="HERALD_BROKER_MAX_APPEND_RATE",
                                        help="Most bytes/s any one journal may be appended at, "
                                             "bounding its spec's max_append_rate too (appenders "
                                             "wait; 0: no broker-wide limit)."),
    max_header_bytes: int = typer.Option(DEFAULT_MAX_HEADER_BYTES, "--max-header-bytes",
                                         "--broker.max-header-bytes",
                                         envvar="HERALD_BROKER_MAX_HEADER_BYTES",
                                         help="Longest request line or header field (400 beyond)."),
    lone_append_bytes: int = typer.Option(DEFAULT_LONE_APPEND_BYTES, "--lone-append-bytes",
                                          "--broker.lone-append-bytes", min=0,
                                          envvar="HERALD_BROKER_LONE_APPEND_BYTES",
                                          help="A sync round of one journal's appends under this many "
                                               "bytes (one writer, typically) is made durable by one "
                                               "fdatasync of the broker's commit log instead of two in "
                                               "place; 0: always in place (on a disk shared with "
                                               "flush-heavy neighbours, the log's tail may be worse)."),
    idle_timeout: str = typer.Option(format_duration(DEFAULT_IDLE_TIMEOUT_S), "--idle-timeout",
                                     "--broker.idle-timeout", envvar="HERALD_BROKER_IDLE_TIMEOUT",
                                     help="Close a connection idle (or still sending its request "
                                          "headers) this long."),
    body_timeout: str = typer.Option(format_duration(DEFAULT_BODY_TIMEOUT_S), "--body-timeout",
                                     "--broker.body-timeout", envvar="HERALD_BROKER_BODY_TIMEOUT",
                                     help="Longest time to receive a request body (408 beyond)."),
    etcd: str = typer.Option(None, "--etcd", "--etcd.address", envvar="HERALD_ETCD",
                             help="etcd URL: run as a cluster member (default: embedded, no etcd)."),
    etcd_prefix: str = typer.Option("/herald/cluster", "--etcd.prefix", envvar="HERALD_ETCD_PREFIX"),
    etcd_lease: str = typer.Option("20s", "--etcd.lease", envvar="HERALD_ETCD_LEASE",
                                   help="Member lease TTL: a dead broker's journals move after it."),
    zone: str = typer.Option("local", "--zone", "--broker.zone", envvar="HERALD_BROKER_ZONE"),
    broker_id: str = typer.Option("", "--id", "--broker.id", envvar="HERALD_BROKER_ID",
                                  help="Member name within its zone [default: random]."),
    advertise: str = typer.Option(None, "--advertise", "--broker.advertise", envvar="HERALD_BROKER_ADVERTISE",
                                  help="URL peers and clients use [default: http://HOST:PORT]."),
    auth_keys: str = typer.Option(None, "--auth-keys", "--broker.auth-keys", envvar="HERALD_AUTH_KEYS",
                                  help="Comma/space separated base64 HMAC keys: require signed JWTs "
                                       "(the first key signs, any verifies; AA== admits token-less "
                                       "requests) [default: none: no authorization].", show_default=False),
    tls_cert_file: Path = typer.Option(None, "--tls.cert-file", envvar="HERALD_TLS_CERT_FILE",
                                       help="PEM certificate (chain): serve HTTPS [default: none: plain HTTP]."),
    tls_key_file: Path = typer.Option(None, "--tls.key-file", envvar="HERALD_TLS_KEY_FILE",
                                      help="PEM private key of --tls.cert-file [default: in that file]."),
    tls_ca_file: Path = typer.Option(None, "--tls.ca-file", envvar="HERALD_TLS_CA_FILE",
                                     help="PEM CA: require client certificates it signed (mutual TLS, "
                                          "peers included) and trust peers it signed [default: none: no client "
                                          "certificates]."),
    event_loop: str = typer.Option("uvloop", "--event-loop", "--broker.event-loop",
                                   envvar="HERALD_BROKER_EVENT_LOOP",
                                   help="uvloop (libuv; less CPU per request) or asyncio (the "
                                        "standard library's loop)."),
    log_level: str = log_level_option("info", "HERALD_LOG_LEVEL"),
    log_format: str = typer.Option("text", "--log.format", envvar="HERALD_LOG_FORMAT",
                                   help="text or json"),
) -> None:
    """Serve journals over HTTP until SIGTERM (then finish appends, persist spools, exit 0)."""
    if event_loop not in EVENT_LOOPS:
        raise typer.BadParameter(f"must be one of {', '.join(EVENT_LOOPS)}", param_hint="--event-loop")
    if log_format not in ("text", "json"):
        raise typer.BadParameter("must be text or json", param_hint="--log.format")
    _check_data_dir(data_dir)
    configure(log_level, log_format)
    lease_s = parse_duration(etcd_lease, "--etcd.lease")
    if lease_s < 1:
        raise typer.BadParameter("must be at least 1s", param_hint="--etcd.lease")
    settings = BrokerSettings(host=host, port=port, data_dir=data_dir, file_root=file_root,
                              max_append_bytes=max_append_bytes, max_append_rate=max_append_rate,
                              max_header_bytes=max_header_bytes, lone_append_bytes=lone_append_bytes,
                              idle_timeout_s=_positive_duration(idle_timeout, "--idle-timeout"),
                              body_timeout_s=_positive_duration(body_timeout, "--body-timeout"),
                              etcd=etcd, etcd_prefix=etcd_prefix,
                              etcd_lease_s=int(lease_s), zone=zone, id=broker_id, advertise=advertise,
                              auth_keys=auth_keys, tls_cert_file=tls_cert_file, tls_key_file=tls_key_file,
                              tls_ca_file=tls_ca_file)
    with asyncio.Runner(loop_factory=EVENT_LOOPS[event_loop]) as runner:
        runner.run(serve(settings, ready=lambda line: print(line, flush=True)))


def _check_data_dir(data_dir: Path) -> None:
    """Create ``--data-dir`` (and parents) durably — each new level fsynced in its
    parent, or a power cut loses the whole directory and every acknowledged byte in
    it — or refuse it in one line naming the flag."""
    if data_dir.exists() and not data_dir.is_dir():
        raise ValidationError("--data-dir", f"{data_dir} is a file, not a directory; "
                                            "remove it or choose another --data-dir")
    try:
        make_durable_dirs(data_dir)
    except OSError as err:
        raise ValidationError("--data-dir", f"cannot create {data_dir} ({err.strerror}); "
                                            "choose a writable --data-dir") from None


def _positive_duration(text: str, flag: str) -> float:
    seconds = parse_duration(text, flag)
    if seconds <= 0:
        raise typer.BadParameter("must be a positive duration like 30s", param_hint=flag)
    return seconds
