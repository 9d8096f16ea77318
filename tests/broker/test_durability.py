"""Crash and restart: [I-FRAG-1], [I-FRAG-2], [I-APPEND-2], and SIGTERM persisting spools."""

from __future__ import annotations

import re
import shutil
import socket

import cramjam

from herald.testing import apply_specs, journal_spec


def read_all(proc, journal: str) -> bytes:
    with proc.client() as http:
        resp = http.get(f"/{journal}")
        return resp.content if resp.status_code == 206 else b""


def test_kill_9_after_acknowledged_append_loses_nothing(broker):
    """[I-FRAG-2] every acknowledged byte survives kill -9; restart on the same disk."""
    apply_specs(broker.url, journal_spec("crash/journal"))
    acked = b""
    with broker.client() as http:
        for i in range(50):
            body = f"record {i}\n".encode()
            assert http.put("/crash/journal", content=body).status_code == 204
            acked += body
    broker.kill()
    broker.start()
    assert read_all(broker, "crash/journal") == acked
    with broker.client() as http:  # and it keeps appending after the recovered head
        put = http.put("/crash/journal", content=b"after\n")
    assert put.headers["X-Commit-Begin"] == str(len(acked))


def test_sigterm_persists_spools_with_gazette_names(broker):
    apply_specs(broker.url, journal_spec("persist/journal"))
    content = b"".join(f"line {i}\n".encode() for i in range(100))
    with broker.client() as http:
        http.put("/persist/journal", content=content)
    assert broker.terminate() == 0
    files = list((broker.file_root / "persist" / "journal").iterdir())
    assert len(files) == 1
    name = files[0].name
    assert re.fullmatch(rf"0{{16}}-{len(content):016x}-[0-9a-f]{{40}}\.sz", name)
    assert bytes(cramjam.snappy.decompress(files[0].read_bytes())) == content


def test_empty_data_dir_over_existing_store_serves_persisted_bytes(broker_factory, tmp_path):
    """[I-FRAG-1] the index is rebuilt from the store listing."""
    first = broker_factory(tmp_path / "d1", tmp_path / "store")
    apply_specs(first.url, journal_spec("rebuild/journal"))
    with first.client() as http:
        http.put("/rebuild/journal", content=b"persisted bytes\n")
    assert first.terminate() == 0
    shutil.rmtree(tmp_path / "d1")
    second = broker_factory(tmp_path / "d1", tmp_path / "store")
    apply_specs(second.url, journal_spec("rebuild/journal"))
    assert read_all(second, "rebuild/journal") == b"persisted bytes\n"
    with second.client() as http:
        put = http.put("/rebuild/journal", content=b"more\n")
    assert put.headers["X-Commit-Begin"] == str(len(b"persisted bytes\n"))


def test_client_disconnect_mid_body_leaves_no_byte(broker):
    """[I-APPEND-2] a PUT whose body never completes writes nothing."""
    apply_specs(broker.url, journal_spec("partial/journal"))
    host, port = broker.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"PUT /partial/journal HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
                     + b"x" * 500)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1024)  # the broker answers or closes once it sees the body cannot complete
    with broker.client() as http:
        assert http.put("/partial/journal", content=b"whole\n").headers["X-Commit-Begin"] == "0"
    assert read_all(broker, "partial/journal") == b"whole\n"


def test_fragments_roll_at_length_and_each_codec_reads_back(broker):
    codecs = ["NONE", "GZIP", "SNAPPY", "ZSTANDARD"]
    specs = [journal_spec(f"codec/{c.lower()}", length=1024, compression_codec=c) for c in codecs]
    apply_specs(broker.url, *specs)
    payload = [f"{i:04d} ".encode() * 100 + b"\n" for i in range(8)]  # 8 × 501 bytes
    with broker.client() as http:
        for spec in specs:
            for body in payload:
                http.put(f"/{spec['name']}", content=body)
    assert broker.terminate() == 0
    broker.start()
    for codec, spec in zip(codecs, specs):
        files = sorted((broker.file_root / spec["name"]).iterdir())
        assert len(files) >= 3, codec  # 1 KiB fragments over 4 KiB of content
        ext = {"NONE": ".raw", "GZIP": ".gz", "SNAPPY": ".sz", "ZSTANDARD": ".zst"}[codec]
        assert all(f.name.endswith(ext) for f in files)
        assert read_all(broker, spec["name"]) == b"".join(payload)
