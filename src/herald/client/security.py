"""A client's credentials and TLS trust: bearer token, CA file, client certificate.

Read from the environment when not given, as Gazette's clients do:
``BROKER_AUTH_TOKEN`` (a JWT, see `herald auth token`), ``BROKER_TRUSTED_CA_FILE``,
``BROKER_CERT_FILE`` and ``BROKER_CERT_KEY_FILE``. This module is the client's one
reader of the environment. The settings are frozen and picklable, so Spark ships
them to executors and clients are built there.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herald.tls import client_context

__all__ = ["ClientSecurity"]

ENV_NAMES = {"auth_token": "BROKER_AUTH_TOKEN", "ca_file": "BROKER_TRUSTED_CA_FILE",
             "cert_file": "BROKER_CERT_FILE", "key_file": "BROKER_CERT_KEY_FILE"}


@functools.cache
def _default_context() -> ssl.SSLContext:
    """What ``verify=True`` gives each httpx client, shared: loading the CA bundle
    costs ~40 ms per client, and Spark builds a client per task and per trigger."""
    import httpx  # here: a `plain` client (herald.client.plain) never loads httpx

    return httpx.create_ssl_context()


@functools.cache
def _plain_http_context() -> ssl.SSLContext:
    """httpx's ``verify`` for a plain ``http://`` address: httpx wants a context even
    for a client that never speaks TLS, and the default one's CA bundle costs 15-40 ms
    in every fresh process (each stream query's Spark source runner). This one trusts
    no CA, so any TLS through it fails verification: never passes unverified."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client proves who it is and whom it trusts (all optional)."""

    auth_token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: str | None) -> ClientSecurity:
        """``given`` values, each falling back to its environment variable."""
        env = os.environ if env is None else env
        return cls(**{k: given.get(k) or env.get(name) or None for k, name in ENV_NAMES.items()})

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}

    def verify(self, address: str = "") -> ssl.SSLContext:
        """httpx's ``verify``: our context when a CA or client certificate is set,
        else for a plain ``http://`` address one without CAs, else httpx's default
        one; each built once per process."""
        if self.ca_file or self.cert_file:
            return client_context(self.ca_file, self.cert_file, self.key_file, flag_prefix="--broker")
        if address.lower().startswith("http://"):
            return _plain_http_context()
        return _default_context()

    def httpx_options(self, address: str = "") -> dict[str, Any]:
        """httpx client options for a client of ``address``."""
        return {"headers": self.headers(), "verify": self.verify(address)}

    def __repr__(self) -> str:  # never print a token
        shown = {k: ("***" if k == "auth_token" else v) for k in ENV_NAMES if (v := getattr(self, k))}
        return f"ClientSecurity({shown})"
