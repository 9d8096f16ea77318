"""TLS, mutual TLS and JWT auth together: three brokers on a real etcd, every
listener HTTPS (certificate and key in separate files: ``--tls.key-file``), every
peer and client presenting a certificate from a throwaway CA (trustme),
replication and proxying authenticated by the brokers' own tokens, and the CLI
configured only by its environment (CA, client certificate, token)."""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
import time

import httpx
import pytest
import trustme

from herald.auth import AuthKeys, Capability, Claims
from herald.client import BrokerClient, ClientSecurity, RetryReader
from herald.protocol.labels import LabelSelector
from herald.testing import BrokerProcess, journal_spec, wait_for_route

pytestmark = pytest.mark.slow
KEY = base64.b64encode(b"t" * 32).decode()
JOURNAL = "tls/journal"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, one broker certificate (shared by the three brokers, its key in a file of
    its own) and a client one."""
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    broker = ca.issue_cert("127.0.0.1", "localhost")
    for i, pem in enumerate(broker.cert_chain_pems):
        pem.write_to_path(str(root / "broker.pem"), append=i > 0)
    broker.private_key_pem.write_to_path(str(root / "broker-key.pem"))
    client = ca.issue_cert("herald-client@example.com")
    client.cert_chain_pems[0].write_to_path(str(root / "client.pem"))
    client.private_key_pem.write_to_path(str(root / "client-key.pem"))
    return root


def token(caps: int = Capability.LIST | Capability.APPLY | Capability.READ | Capability.APPEND) -> str:
    return AuthKeys.parse(KEY).sign(Claims(caps, LabelSelector(), time.time() + 600))


def security(pki, with_cert: bool = True, with_token: bool = True) -> ClientSecurity:
    return ClientSecurity(auth_token=token() if with_token else None, ca_file=str(pki / "ca.pem"),
                          cert_file=str(pki / "client.pem") if with_cert else None,
                          key_file=str(pki / "client-key.pem") if with_cert else None)


@pytest.fixture(scope="module")
def tls_cluster(etcd, tmp_path_factory, pki):
    """Started once for the module: three brokers cost seconds on a busy machine."""
    root = tmp_path_factory.mktemp("tls-cluster")
    brokers = []
    for zone in "abc":
        brokers.append(BrokerProcess(
            root / f"data-{zone}", root / "store", "--etcd", etcd.url, "--etcd.prefix", "/herald/test/tls",
            "--zone", zone, "--id", f"b{zone}", "--etcd.lease", "4s", "--auth-keys", KEY,
            "--tls.cert-file", str(pki / "broker.pem"), "--tls.key-file", str(pki / "broker-key.pem"),
            "--tls.ca-file", str(pki / "ca.pem")).start())
    yield brokers
    for proc in brokers:
        proc.kill()


def test_three_broker_tls_cluster_replicates_and_proxies_with_its_own_tokens(tls_cluster, pki):
    assert all(p.url.startswith("https://127.0.0.1:") for p in tls_cluster)
    with BrokerClient(tls_cluster[0].url, security=security(pki)) as admin:
        admin.apply([{"upsert": dict(journal_spec(JOURNAL), replication=3), "expect_mod_revision": 0}])
        wait_for_route(admin, JOURNAL, 3)
    expected = b""
    for i, proc in enumerate(tls_cluster):  # two of the three appends are proxied to the primary
        with BrokerClient(proc.url, security=security(pki)) as client:
            record = f'{{"n": {i}}}\n'.encode()
            client.append(JOURNAL, record)
            expected += record
    for proc in tls_cluster:  # every broker serves every replicated byte
        with BrokerClient(proc.url, security=security(pki)) as client:
            assert b"".join(c for _, c in RetryReader(client, JOURNAL, block=False)) == expected


def test_cli_lists_journals_over_mutual_tls_with_a_token_from_its_environment(tls_cluster, pki):
    env = {**os.environ, "BROKER_ADDRESS": tls_cluster[1].url, "BROKER_TRUSTED_CA_FILE": str(pki / "ca.pem"),
           "BROKER_CERT_FILE": str(pki / "client.pem"), "BROKER_CERT_KEY_FILE": str(pki / "client-key.pem"),
           "BROKER_AUTH_TOKEN": token(Capability.LIST)}
    with BrokerClient(tls_cluster[0].url, security=security(pki)) as admin:
        admin.apply([{"upsert": journal_spec("tls/listed"), "expect_mod_revision": -1}])
    run = subprocess.run([sys.executable, "-m", "herald.cli.main", "journals", "list"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "tls/listed" in run.stdout
    env.pop("BROKER_AUTH_TOKEN")
    denied = subprocess.run([sys.executable, "-m", "herald.cli.main", "journals", "list"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert denied.returncode != 0 and "bearer token is required" in denied.stderr  # the token did the work


def test_tls_cluster_refuses_clients_without_certificate_token_or_tls(tls_cluster, pki):
    url = tls_cluster[0].url
    with pytest.raises(httpx.TransportError):  # mutual TLS: no client certificate, no connection
        with BrokerClient(url, security=security(pki, with_cert=False)) as client:
            client.list("")
    with BrokerClient(url, security=security(pki, with_token=False)) as client:
        resp = client.http.post("/v1/journals/list", json={})
    assert resp.status_code == 401
    with pytest.raises(httpx.HTTPError):  # plain HTTP to a TLS listener
        httpx.post(url.replace("https://", "http://") + "/v1/journals/list", json={}, timeout=5)
    untrusting = ssl.create_default_context()  # the system roots do not know our CA
    with pytest.raises(httpx.ConnectError):
        httpx.post(url + "/v1/journals/list", json={}, verify=untrusting, timeout=5)


def test_peer_endpoints_refuse_a_client_token_without_replicate(tls_cluster, pki):
    with BrokerClient(tls_cluster[0].url, security=security(pki)) as client:
        resp = client.http.post("/v1/replicate/sync", params={"journal": JOURNAL},
                                json={"end": 0, "registers": [], "fragment_begin": 0})
    assert resp.status_code == 403 and resp.json()["status"] == "PERMISSION_DENIED"


def test_bad_tls_files_stop_the_broker_with_one_line_naming_the_flag(tmp_path, pki):
    with pytest.raises(RuntimeError, match="--tls.cert-file"):
        BrokerProcess(tmp_path / "d", None, "--tls.cert-file", str(tmp_path / "missing.pem")).start()
    with pytest.raises(RuntimeError, match="--tls.cert-file.*required"):
        BrokerProcess(tmp_path / "e", None, "--tls.ca-file", str(pki / "ca.pem")).start()
