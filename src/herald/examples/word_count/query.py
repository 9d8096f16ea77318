"""A client of the word-count query service (what ``word-count query`` runs).

Errors come back as Herald's typed errors: a 400 from the service is re-raised
as the `ValidationError` it sent (naming the parameter); an unreachable service
is a HeraldError naming ``--service``.
"""

from __future__ import annotations

from typing import Any

import httpx

from herald.protocol.errors import HeraldError, Status

__all__ = ["DEFAULT_SERVICE", "query_bigram", "query_prefix"]

DEFAULT_SERVICE = "http://localhost:8090"
TIMEOUT_S = 30.0


def _get(service: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
    try:
        resp = httpx.get(f"{service.rstrip('/')}{path}", params=params, timeout=TIMEOUT_S)
    except httpx.TransportError as err:
        raise HeraldError(Status.REQUEST_TIMEOUT if isinstance(err, httpx.TimeoutException) else Status.INTERNAL,
                          f"cannot reach the word-count service at {service}: {err}", "service") from None
    except httpx.InvalidURL as err:
        raise HeraldError(Status.INVALID_ARGUMENT, f"{service!r}: {err}", "service") from None
    try:
        doc = resp.json()
    except ValueError:
        raise HeraldError(Status.INTERNAL, f"{service} answered {resp.status_code} without JSON "
                                           "(is it the word-count service?)", "service") from None
    if resp.status_code != 200 or not isinstance(doc, dict):
        raise HeraldError.from_dict(doc if isinstance(doc, dict) else {"message": str(doc)[:200]})
    return doc


def query_bigram(service: str, w1: str, w2: str) -> dict[str, Any]:
    """``{"bigram", "w1", "w2", "count"}`` of one bigram (count 0 if never seen)."""
    return _get(service, "/api/bigram", {"w1": w1, "w2": w2})


def query_prefix(service: str, prefix: str, limit: int) -> dict[str, Any]:
    """``{"prefix", "bigrams": [{"bigram", "count"}…], "truncated"}``: bigrams starting with ``prefix``."""
    return _get(service, "/api/bigrams", {"prefix": prefix, "limit": limit})
