"""The Spark connector against a broker run with ``--auth-keys`` and mutual TLS:
the options ``authToken``, ``trustedCAFile``, ``certFile`` and ``keyFile`` reach
every executor, for batch reads and the transactional sink alike."""

from __future__ import annotations

import base64
import time

import pytest
import trustme

from herald.auth import ALL_CAPABILITIES, AuthKeys, Capability, Claims
from herald.client import BrokerClient, ClientSecurity, RetryReader
from herald.protocol.labels import LabelSelector
from herald.testing import BrokerProcess, journal_spec

pytestmark = pytest.mark.spark
KEY = base64.b64encode(b"s" * 32).decode()


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """(broker, Spark options for it, a client with every capability)."""
    root = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(root / "broker.pem"))
    leaf = ca.issue_cert("spark-job")
    leaf.cert_chain_pems[0].write_to_path(str(root / "client.pem"))
    leaf.private_key_pem.write_to_path(str(root / "client-key.pem"))
    proc = BrokerProcess(root / "data", None, "--auth-keys", KEY, "--tls.cert-file", str(root / "broker.pem"),
                         "--tls.ca-file", str(root / "ca.pem")).start()
    files = {"trustedCAFile": str(root / "ca.pem"), "certFile": str(root / "client.pem"),
             "keyFile": str(root / "client-key.pem")}
    admin = ClientSecurity(AuthKeys.parse(KEY).sign(Claims(ALL_CAPABILITIES, LabelSelector(), time.time() + 600)),
                           files["trustedCAFile"], files["certFile"], files["keyFile"])
    with BrokerClient(proc.url, security=admin) as client:
        for name in ("secure/in", "secure/out"):
            spec = journal_spec(name)
            spec["labels"].append({"name": "app", "value": name.split("/")[1]})
            client.apply([{"upsert": spec, "expect_mod_revision": 0}])
        client.append("secure/in", b"".join(b'{"n": %d}\n' % i for i in range(50)))
        yield proc, files, client
    proc.kill()


def scoped_token(caps: int, selector: str) -> str:
    return AuthKeys.parse(KEY).sign(Claims(caps, LabelSelector.parse(selector), time.time() + 600))


def test_batch_read_and_sink_carry_token_and_certificates_to_executors(spark, secured):
    proc, files, client = secured
    read_token = scoped_token(Capability.LIST | Capability.READ, "app=in")
    df = (spark.read.format("herald").options(broker=proc.url, selector="app=in", authToken=read_token, **files)
          .load())
    assert sorted(int(bytes(r.value)[6:-1]) for r in df.collect()) == list(range(50))
    write_token = scoped_token(Capability.LIST | Capability.READ | Capability.APPEND, "app=out")
    (df.select("value").write.format("herald")
     .options(broker=proc.url, selector="app=out", authToken=write_token, **files).mode("append").save())
    written = b"".join(c for _, c in RetryReader(client, "secure/out", block=False))
    assert written.count(b"\n") >= 50 and b'"n": 49' in written


def test_a_token_outside_the_selector_reads_nothing_and_no_token_fails_clearly(spark, secured):
    proc, files, _ = secured
    token = scoped_token(Capability.LIST | Capability.READ, "app=in")
    hidden = spark.read.format("herald").options(broker=proc.url, selector="app=out", authToken=token, **files)
    assert hidden.load().count() == 0  # app=out exists, but this token cannot see it
    with pytest.raises(Exception, match="bearer token is required"):
        spark.read.format("herald").options(broker=proc.url, selector="app=in", **files).load().collect()
