"""`herald.auth` without a broker: which tokens verify, and capability parsing."""

from __future__ import annotations

import base64
import time

import jwt
import pytest

from herald.auth import LEEWAY_S, AuthKeys, Capability, Claims, parse_capabilities
from herald.protocol.errors import HeraldError, Status, ValidationError

SECRET = b"s" * 64  # long enough for HS512 too: PyJWT warns of nothing
KEYS = AuthKeys.parse(base64.b64encode(SECRET).decode())


def encode(doc: dict, algorithm: str = "HS256", key: bytes | None = SECRET) -> str:
    return jwt.encode(doc, key, algorithm=algorithm)


def refused(token: str) -> HeraldError:
    with pytest.raises(HeraldError) as err:
        KEYS.verify(token)
    assert err.value.status is Status.UNAUTHORIZED and err.value.field == "Authorization"
    return err.value


def test_hs256_and_hs384_tokens_verify():
    for algorithm in ("HS256", "HS384"):
        claims = KEYS.verify(encode({"cap": Capability.READ, "exp": time.time() + 60}, algorithm))
        assert claims.allows(Capability.READ) and not claims.allows(Capability.APPEND)


@pytest.mark.parametrize("algorithm", ["HS512", "none"])
def test_other_algorithms_are_refused(algorithm):
    token = encode({"cap": Capability.READ, "exp": time.time() + 60}, algorithm, None if algorithm == "none" else SECRET)
    assert "invalid token" in refused(token).message


def test_a_token_without_exp_is_refused():
    assert "exp" in refused(encode({"cap": Capability.READ})).message


def test_expiry_has_a_few_seconds_of_leeway():
    assert KEYS.verify(encode({"cap": Capability.LIST, "exp": int(time.time()) - 2})).allows(Capability.LIST)
    assert "expired" in refused(encode({"cap": Capability.LIST, "exp": int(time.time()) - LEEWAY_S - 5})).message


def test_application_capability_bits_parse_sign_and_verify():
    app_bits = (1 << 16) | (1 << 31)
    assert parse_capabilities(f"READ, {1 << 16} {1 << 31}") == Capability.READ | app_bits
    token = KEYS.sign(Claims(Capability.READ | app_bits, expires_at=time.time() + 60))
    claims = KEYS.verify(token)
    assert claims.allows(1 << 16) and claims.allows(1 << 31) and not claims.allows(1 << 17)
    for bad in (str(1 << 32), "0", "READ,WRITE", ""):
        with pytest.raises(ValidationError):
            parse_capabilities(bad)
    assert "cap" in refused(encode({"cap": 1 << 32, "exp": time.time() + 60})).message


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")  # AA== is one byte
def test_without_anonymous_drops_the_published_key():
    mixed = AuthKeys.parse(f"AA== {base64.b64encode(SECRET).decode()}")
    assert mixed.allows_anonymous
    zero_signed = AuthKeys([b"\0"], allows_anonymous=True).sign(Claims(Capability.REPLICATE, expires_at=time.time() + 60))
    assert mixed.verify(zero_signed).allows(Capability.REPLICATE)  # clients: anyone may, under AA==
    peers = mixed.without_anonymous()
    assert peers is not None and not peers.allows_anonymous
    with pytest.raises(HeraldError):
        peers.verify(zero_signed)
    assert AuthKeys.parse("AA==").without_anonymous() is None
