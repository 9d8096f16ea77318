"""TLS contexts for brokers and clients (``--tls.*`` flags; off by default).

A broker given a certificate serves HTTPS; given a CA file as well, it requires
every client — peers included — to present a certificate that CA signed (mutual
TLS), and trusts peers signed by it. Clients trust a CA file and may present a
certificate of their own. Every file is checked when the context is built, so a
wrong path is one clear error naming its flag, not a failed handshake later.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

from herald.protocol.errors import ValidationError

__all__ = ["client_context", "server_context"]


def _load(action: Callable[[], object], flag: str, path: Path | str) -> None:
    try:
        action()
    except (OSError, ssl.SSLError) as err:
        raise ValidationError(flag, f"cannot use {path}: {err}") from None


def server_context(cert_file: Path, key_file: Path | None, ca_file: Path | None) -> ssl.SSLContext:
    """The listener's context: our certificate, and mTLS when ``ca_file`` is given."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load(lambda: ctx.load_cert_chain(cert_file, key_file), "--tls.cert-file", cert_file)
    if ca_file:
        _load(lambda: ctx.load_verify_locations(cafile=str(ca_file)), "--tls.ca-file", ca_file)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(ca_file: Path | str | None, cert_file: Path | str | None = None,
                   key_file: Path | str | None = None, flag_prefix: str = "--tls") -> ssl.SSLContext:
    """A verifying client context: trust ``ca_file`` (else the system's roots) and
    present ``cert_file`` when a server wants mutual TLS."""
    ctx = ssl.create_default_context()
    if ca_file:
        _load(lambda: ctx.load_verify_locations(cafile=str(ca_file)), f"{flag_prefix}.ca-file", ca_file)
    if cert_file:
        _load(lambda: ctx.load_cert_chain(cert_file, key_file), f"{flag_prefix}.cert-file", cert_file)
    return ctx
