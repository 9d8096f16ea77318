"""Gazette's authorization model: HMAC-signed JWTs carrying capabilities and a selector.

A token's claims are the JWT registered claims plus ``cap``, a capability bitmask,
and ``sel``, a label selector. A broker started with ``--auth-keys`` verifies the
bearer token of every request: the endpoint's capability must be in ``cap``, and a
journal is visible only if ``sel`` matches its labels plus its ``name`` meta-label.
Keys are base64 HMAC secrets; the first signs, any verifies, so keys rotate by
prepending a new one. The special key ``AA==`` lets requests that carry no token
through, a rollout aid (as in Gazette).

    keys = AuthKeys.parse("c2VjcmV0")
    token = keys.sign(Claims(Capability.READ, LabelSelector.parse("prefix=events/"),
                             expires_at=time.time() + 3600))
    keys.verify(token).allows(Capability.READ)   # True

This module is Herald's one user of PyJWT: signatures are never hand-rolled.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import jwt
from jwt.warnings import InsecureKeyLengthWarning

from herald.protocol.errors import HeraldError, Status, ValidationError
from herald.protocol.labels import Label, LabelSelector, LabelSet, rewrite_prefix_selector

__all__ = ["ALL_CAPABILITIES", "AuthKeys", "Capability", "Claims", "parse_capabilities"]


class Capability(enum.IntFlag):
    """Gazette's capability bits; bits from 1<<16 up are free for applications."""

    LIST = 1 << 1
    APPLY = 1 << 2
    READ = 1 << 3
    APPEND = 1 << 4
    REPLICATE = 1 << 5


ALL_CAPABILITIES = (1 << 32) - 1  # Gazette's ALL: every bit of a uint32.
LEEWAY_S = 5
ALGORITHMS = ("HS256", "HS384")
ANONYMOUS_KEY = "AA=="
MIN_KEY_BYTES = 32  # RFC 7518 §3.2 for HS256: shorter keys are accepted, and warned of once.

# Gazette accepts any key length (``AA==`` is one byte); the broker warns once at start
# (`AuthKeys.short_keys`) rather than PyJWT on every request.
warnings.filterwarnings("ignore", category=InsecureKeyLengthWarning)


def parse_capabilities(text: str, field_name: str = "cap") -> int:
    """``READ,APPEND`` (names or integers, ``ALL`` for every bit) as a bitmask."""
    total = 0
    for part in filter(None, re.split(r"[\s,|]+", text.strip())):
        if part.upper() == "ALL":
            total |= ALL_CAPABILITIES
        elif part.isdigit():
            total |= int(part)
        elif part.upper() in Capability.__members__:
            total |= Capability[part.upper()]
        else:
            names = ", ".join([*Capability.__members__, "ALL"])
            raise ValidationError(field_name, f"unknown capability {part!r} (one of {names}, or an integer)")
    if not 0 < total <= ALL_CAPABILITIES:
        raise ValidationError(field_name, "at least one capability (within 32 bits) is required")
    return total


@dataclass(frozen=True, slots=True)
class Claims:
    """What a token lets its bearer do, until ``expires_at`` (unix seconds)."""

    capability: int
    selector: LabelSelector = field(default_factory=LabelSelector)
    expires_at: float = 0.0
    subject: str = ""

    def allows(self, capability: int) -> bool:
        return self.capability & capability == capability

    def sees(self, labels_with_meta: LabelSet) -> bool:
        """Whether a journal with these labels (``name`` meta-label included) is visible."""
        return self.selector.matches(labels_with_meta)

    def to_jwt(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"cap": self.capability, "exp": int(self.expires_at),
                               "sel": _selector_to_json(self.selector)}
        if self.subject:
            doc["sub"] = self.subject
        return doc

    @classmethod
    def from_jwt(cls, doc: dict[str, Any]) -> Claims:
        cap = doc.get("cap", 0)
        if not isinstance(cap, int) or isinstance(cap, bool) or not 0 <= cap <= ALL_CAPABILITIES:
            raise ValidationError("cap", "must be a capability bitmask (uint32)")
        return cls(cap, _selector_from_json(doc.get("sel")), float(doc["exp"]), str(doc.get("sub", "")))


def _selector_to_json(selector: LabelSelector) -> dict[str, Any]:
    """Gazette's JSON form of a LabelSelector (``{include: {labels: [...]}, ...}``),
    with Gazette's ``prefix: true`` on prefix-matching labels."""
    def labels(part: LabelSet) -> list[dict[str, Any]]:
        return [{"name": x.name, "value": x.value, **({"prefix": True} if x.prefix else {})} for x in part]
    return {part: {"labels": labels(getattr(selector, part))} for part in ("include", "exclude")
            if len(getattr(selector, part))}


def _labels_from_json(raw: Any, field_name: str) -> LabelSet:
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ValidationError(field_name, "must be a list of labels")
    plain = LabelSet.from_list([{k: v for k, v in x.items() if k != "prefix"} for x in raw])
    prefixed = {(x.get("name"), x.get("value") or "") for x in raw if x.get("prefix") is True}
    return LabelSet(tuple(Label(x.name, x.value, (x.name, x.value) in prefixed) for x in plain))


def _selector_from_json(raw: Any) -> LabelSelector:
    """``sel`` as Gazette's JSON object, or Herald's selector text; absent = everything."""
    if raw is None or raw == "":
        return LabelSelector()
    if isinstance(raw, str):
        return rewrite_prefix_selector(LabelSelector.parse(raw))
    if not isinstance(raw, dict):
        raise ValidationError("sel", "must be a label selector (object or text)")
    parts = {}
    for part in ("include", "exclude"):
        section = raw.get(part) or {}
        if not isinstance(section, dict):
            raise ValidationError(f"sel.{part}", "must be an object with labels")
        parts[part] = _labels_from_json(section.get("labels") or [], f"sel.{part}.labels")
    return rewrite_prefix_selector(LabelSelector(parts["include"], parts["exclude"]))


class AuthKeys:
    """The HMAC keys of ``--auth-keys``: the first signs, any verifies."""

    def __init__(self, keys: list[bytes], allows_anonymous: bool) -> None:
        if not keys:
            raise ValidationError("auth-keys", "at least one key is required")
        self._keys = keys
        self.allows_anonymous = allows_anonymous

    @property
    def short_keys(self) -> int:
        """How many keys (``AA==`` aside) are shorter than RFC 7518 recommends."""
        return sum(1 for k in self._keys if k != b"\0" and len(k) < MIN_KEY_BYTES)

    def without_anonymous(self) -> AuthKeys | None:
        """These keys less ``AA==`` (None if nothing else is left): what verifies
        broker-to-broker tokens, which anyone could sign with a published key."""
        keys = [k for k in self._keys if k != b"\0"]
        return AuthKeys(keys, allows_anonymous=False) if keys else None

    @classmethod
    def parse(cls, text: str, field_name: str = "auth-keys") -> AuthKeys:
        """Comma/space separated base64 keys; ``AA==`` admits token-less requests."""
        keys, anonymous = [], False
        for part in filter(None, re.split(r"[\s,]+", text.strip())):
            try:
                key = base64.b64decode(part, validate=True)
            except (binascii.Error, ValueError):
                raise ValidationError(field_name, f"{part[:8]!r}… is not base64") from None
            anonymous |= part == ANONYMOUS_KEY
            keys.append(key)
        if not keys:
            raise ValidationError(field_name, "no keys given")
        return cls(keys, anonymous)

    def sign(self, claims: Claims) -> str:
        """A compact HS256 token of ``claims``, signed with the first key."""
        return jwt.encode(claims.to_jwt(), self._keys[0], algorithm="HS256")

    def sign_for(self, capability: int, selector: LabelSelector, ttl_s: float, subject: str = "",
                 now: float | None = None) -> str:
        """A token good for ``ttl_s`` seconds from ``now`` (brokers' own, and the CLI's)."""
        expires = (time.time() if now is None else now) + ttl_s
        return self.sign(Claims(capability, selector, expires, subject))

    def verify(self, token: str) -> Claims:
        """The token's claims, or UNAUTHORIZED naming what is wrong with it."""
        last: Exception | None = None
        for key in self._keys:
            try:
                doc = jwt.decode(token, key, algorithms=list(ALGORITHMS), leeway=LEEWAY_S,
                                 options={"require": ["exp"]})
                return Claims.from_jwt(doc)
            except jwt.InvalidSignatureError as err:
                last = err  # try the next key
            except jwt.ExpiredSignatureError:
                raise HeraldError(Status.UNAUTHORIZED, "the token has expired", "Authorization") from None
            except (jwt.InvalidTokenError, ValidationError) as err:
                raise HeraldError(Status.UNAUTHORIZED, f"invalid token: {err}", "Authorization") from None
        raise HeraldError(Status.UNAUTHORIZED, f"invalid token: {last}", "Authorization")
