"""The broker's listening socket and TLS contexts, with errors that name the flag to fix.

Both run before anything is served, from `Broker.start`: a port in use, a host that
is not this machine's, or a TLS file without its certificate is one ``error: …``
line naming ``--host``, ``--port`` or ``--tls.*`` — never a traceback.
"""

from __future__ import annotations

import errno
import socket
import ssl

from herald.broker.settings import BrokerSettings
from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.tls import client_context, server_context


def tls_contexts(settings: BrokerSettings) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """The listener's TLS context and the one for requests to peers (which present
    our certificate, for mutual TLS); (None, None) without ``--tls.cert-file``."""
    s = settings
    if not s.tls_cert_file:
        if s.tls_key_file or s.tls_ca_file:
            raise ValidationError("--tls.cert-file", "is required with --tls.key-file/--tls.ca-file")
        return None, None
    return (server_context(s.tls_cert_file, s.tls_key_file, s.tls_ca_file),
            client_context(s.tls_ca_file, s.tls_cert_file, s.tls_key_file))


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, or a one-line error naming the flags (not a traceback)."""
    try:
        return socket.create_server((host, port))
    except OSError as err:
        raise _listen_error(host, port, err) from None


def _listen_error(host: str, port: int, err: OSError) -> HeraldError:
    """Which flag to fix: ``--host`` (unknown name, not this machine's) or ``--port``."""
    if isinstance(err, socket.gaierror) or (err.errno or 0) < 0:  # getaddrinfo's EAI_* codes
        return HeraldError(Status.INVALID_ARGUMENT, f"cannot resolve {host!r}; use an IP address or a name "
                           "of this machine (127.0.0.1, 0.0.0.0 for all)", "--host")
    if err.errno == errno.EADDRINUSE:
        return HeraldError(Status.INVALID_ARGUMENT, f"{host}:{port} is already in use; stop the process "
                           "holding it or choose another --port (0 picks a free one)", "--port")
    if err.errno == errno.EADDRNOTAVAIL:
        return HeraldError(Status.INVALID_ARGUMENT, f"{host} is not an address of this machine; use one of "
                           "its addresses (127.0.0.1, 0.0.0.0 for all)", "--host")
    return HeraldError(Status.INVALID_ARGUMENT, f"cannot listen on {host}:{port} ({err.strerror}); "
                       "choose another --host/--port", "--port")
