"""`BrokerClient(plain=True)` (`herald.client.plain`): whole calls to an ``http://``
broker over ``http.client`` answer exactly as over httpx — results, typed errors,
the bearer token, httpx's TransportErrors when the broker is down — and a
keep-alive connection the broker closed is reopened, not failed."""

from __future__ import annotations

import base64
import os
import pickle
import resource
import socket
import sys
import time

import httpx
import pytest

from herald.auth import ALL_CAPABILITIES, AuthKeys, Claims
from herald.client import BrokerClient, ClientSecurity
from herald.client.plain import closed_while_idle
from herald.client.transient import is_transient
from herald.protocol.errors import HeraldError, JournalNotFoundError
from herald.protocol.labels import LabelSelector
from herald.testing import BrokerProcess
from tests.client.client_helpers import create

KEY = base64.b64encode(b"p" * 32).decode()


def _answers(client: BrokerClient) -> tuple:
    result = client.append("plain/a", b'{"n": 1}\n')
    return (result.begin, result.end, result.sha1_hex, [i.name for i in client.list("prefix=plain/")],
            client.write_head("plain/a"), client.head("plain/a", 0).write_head,
            [f.fragment.end for f in client.fragments("plain/a")])


def test_plain_and_httpx_clients_give_the_same_answers(broker, client):
    create(client, "plain/a")
    with BrokerClient(broker.url, timeout_s=10, plain=True) as plain:
        assert plain._plain is not None and plain._http is None
        first = _answers(plain)
        second = _answers(client)
        assert first[3:5] == (["plain/a"], 9) and second[:3] == (9, 18, first[2])
        assert plain.write_head("plain/a") == client.write_head("plain/a") == 18
        for call in (lambda c: c.write_head("plain/missing"), lambda c: c.fragments("plain/missing")):
            with pytest.raises(HeraldError) as plain_err:
                call(plain)
            with pytest.raises(HeraldError) as httpx_err:
                call(client)
            assert (type(plain_err.value), str(plain_err.value)) == (type(httpx_err.value), str(httpx_err.value))
        with pytest.raises(JournalNotFoundError):
            plain.fragments("plain/missing")
        assert b"".join(c for _, c in plain.read("plain/a")) == b'{"n": 1}\n' * 2
        assert pickle.loads(pickle.dumps(plain)).plain is True


def test_an_https_address_is_not_plain(tmp_path):
    with BrokerClient("https://127.0.0.1:1", plain=True) as c:
        assert c._plain is None and c._http is not None


def test_a_plain_client_sends_its_token(tmp_path):
    proc = BrokerProcess(tmp_path / "data", None, "--auth-keys", KEY).start()
    try:
        token = AuthKeys.parse(KEY).sign(Claims(ALL_CAPABILITIES, LabelSelector(), time.time() + 600))
        with BrokerClient(proc.url, plain=True, security=ClientSecurity(token)) as c:
            create(c, "plain/t")
            assert [i.name for i in c.list()] == ["plain/t"]
            c.append("plain/t", b"t\n")
            assert list(c.read("plain/t")) == [(0, b"t\n")]  # a streamed read sends it too
        with BrokerClient(proc.url, plain=True, security=ClientSecurity()) as c, \
                BrokerClient(proc.url, security=ClientSecurity()) as h:
            with pytest.raises(HeraldError) as plain_err:
                c.list()
            with pytest.raises(HeraldError) as httpx_err:
                h.list()
            assert plain_err.value.status == httpx_err.value.status
    finally:
        proc.kill()


def test_a_broker_that_is_down_raises_httpx_transport_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens
    with BrokerClient(f"http://127.0.0.1:{port}", plain=True, timeout_s=2) as c:
        with pytest.raises(httpx.ConnectError) as err:
            c.list()
        assert is_transient(err.value)


def test_a_connection_the_broker_closed_is_reopened(broker, client):
    create(client, "plain/r")
    with BrokerClient(broker.url, timeout_s=10, plain=True) as plain:
        assert plain.write_head("plain/r") == 0
        broker.restart()  # kill -9, same port: the kept-alive connection is dead
        assert plain.write_head("plain/r") == 0


def test_a_plain_client_does_not_import_httpx(broker, client):
    import subprocess

    create(client, "plain/i")
    client.append("plain/i", b"i\n")

    code = ("import sys; from herald.client import BrokerClient\n"
            f"c = BrokerClient({broker.url!r}, plain=True); c.list(); list(c.read('plain/i')); c.close()\n"
            "print(sorted(m for m in ('httpx', 'httpcore', 'h11') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]"]


def test_the_idle_connection_check_works_past_descriptor_1024():
    """`select` refuses descriptors from 1,024 on (ValueError); a Spark worker with many
    journals' connections open may hold such a socket."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1100:
        pytest.skip("this process may not open descriptor 1100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1101), hard))
    ours, theirs = socket.socketpair()
    try:
        high = socket.socket(fileno=os.dup2(ours.fileno(), 1100))
        with high:
            assert not closed_while_idle(high)
            theirs.close()
            assert closed_while_idle(high)
    finally:
        ours.close()
        theirs.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
