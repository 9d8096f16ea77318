"""Brokers over an s3:// store on SeaweedFS (signatures checked): persist, list,
cold-start index rebuild [I-FRAG-1], signed-URL read offload (gazette-facts §4.8)
and prune with retention (§4.9). Everything a store serves must be byte-identical
to what the broker serves."""

from __future__ import annotations

import secrets
import shutil
import time

import httpx
import pytest

from herald.client import BrokerClient, FragmentInfo, RetryReader, read_fragment
from herald.fragment.codecs import decompress
from herald.protocol.fragment import Fragment
from herald.testing import BrokerProcess, apply_specs
from tests.broker.s3_helpers import fragments, persisted_through, put, read_range, record, s3_spec

RECORDS = 8


@pytest.fixture(scope="module")
def offload(seaweedfs, tmp_path_factory):
    """A running broker whose journal has RECORDS appends: all but the last spool
    rolled and persisted to the bucket. Yields (broker, journal, acked bytes, prefix)."""
    prefix, journal = f"offload-{secrets.token_hex(4)}", "offload/journal"
    proc = BrokerProcess(tmp_path_factory.mktemp("offload-data"), env=seaweedfs.env).start()
    apply_specs(proc.url, s3_spec(seaweedfs, journal, prefix))
    acked = b""
    with proc.client() as http:
        for i in range(RECORDS):
            assert put(http, journal, record(i)).status_code == 204
            acked += record(i)
        persisted_through(http, journal, len(acked) - len(record(0)))
    yield proc, journal, acked, prefix
    proc.kill()


def test_rolled_spools_are_persisted_to_the_bucket_under_content_names(offload, seaweedfs):
    proc, journal, acked, prefix = offload
    with proc.client() as http:
        persisted = [Fragment.from_dict(i["fragment"]) for i in fragments(http, journal)
                     if i["fragment"]["backing_store"]]
    assert len(persisted) == RECORDS - 1
    assert {f.store for f in persisted} == {seaweedfs.store_url(prefix)}
    listed = seaweedfs.filesystem().find(f"{seaweedfs.bucket}/{prefix}/{journal}/", detail=True)
    assert sorted(p.rsplit("/", 1)[1] for p, info in listed.items() if info["type"] == "file") == sorted(f.content_name for f in persisted)


def test_signed_urls_fetch_by_plain_http_and_decompress_to_broker_reads(offload):
    proc, journal, acked, _ = offload
    with proc.client() as http:
        items = fragments(http, journal, ttl_s=60)
        signed = [i for i in items if i["fragment"]["backing_store"]]
        assert signed and all(i.get("signed_url", "").startswith("http://") for i in signed)
        assert not any("signed_url" in i for i in items if not i["fragment"]["backing_store"])
        for item in signed:
            fragment = Fragment.from_dict(item["fragment"])
            stored = httpx.get(item["signed_url"], timeout=30)
            assert stored.status_code == 200
            assert decompress(stored.content, fragment.codec) == read_range(
                http, journal, fragment.begin, fragment.end) == acked[fragment.begin:fragment.end]


def test_gateway_head_points_at_a_fetchable_fragment_location(offload):
    proc, journal, acked, _ = offload
    offset = len(record(0)) + 7  # inside the second fragment
    with proc.client() as http:
        head = http.head(f"/{journal}", params={"offset": offset})
    fragment_name = head.headers["X-Fragment-Name"]
    fragment = Fragment.from_dict({**_name_fields(journal, fragment_name)})
    stored = httpx.get(head.headers["X-Fragment-Location"], timeout=30)
    assert stored.status_code == 200
    assert decompress(stored.content, fragment.codec) == acked[fragment.begin:fragment.end]
    assert fragment.begin <= offset < fragment.end


def _name_fields(journal: str, content_name: str) -> dict:
    from herald.protocol.fragment import parse_content_path

    return parse_content_path(journal, content_name).to_dict()


def test_offloaded_client_reads_are_byte_identical_to_broker_reads(offload):
    proc, journal, acked, _ = offload
    with BrokerClient(proc.url) as client:
        through_broker = b"".join(c for _, c in RetryReader(client, journal, block=False))
        offloaded = RetryReader(client, journal, block=False, offload=True)
        direct = b"".join(c for _, c in offloaded)
        infos = client.fragments(journal, signature_ttl_s=60)
    assert direct == through_broker == acked
    stats = offloaded.statistics()
    assert stats["offloaded_bytes"] >= len(acked) - len(record(0)) and stats["broker_bytes"] > 0
    for info in infos:
        if info.signed_url:
            assert isinstance(info, FragmentInfo)
            begin, end = info.fragment.begin, info.fragment.end
            assert b"".join(read_fragment(info)) == acked[begin:end]


def test_empty_data_dir_rebuilds_its_index_from_the_bucket(seaweedfs, broker_factory, tmp_path):
    """[I-FRAG-1] a broker on an empty disk serves every persisted byte from S3."""
    prefix, journal = f"cold-{secrets.token_hex(4)}", "cold/journal"
    spec = s3_spec(seaweedfs, journal, prefix)
    first = broker_factory(tmp_path / "d1", None, env=seaweedfs.env)
    apply_specs(first.url, spec)
    acked = b""
    with first.client() as http:
        for i in range(5):
            assert put(http, journal, record(i)).status_code == 204
            acked += record(i)
    assert first.terminate() == 0  # SIGTERM rolls and persists the last spool too
    shutil.rmtree(tmp_path / "d1")
    second = broker_factory(tmp_path / "d2", None, env=seaweedfs.env)
    apply_specs(second.url, spec)
    with second.client() as http:
        assert read_range(http, journal) == acked
        assert all(i["fragment"]["backing_store"] for i in fragments(http, journal))
        resp = put(http, journal, b"next\n")
    assert resp.headers["X-Commit-Begin"] == str(len(acked))


def test_prune_removes_fragments_older_than_retention_from_the_bucket(seaweedfs, broker_factory):
    prefix, journal = f"prune-{secrets.token_hex(4)}", "prune/journal"
    broker = broker_factory(env=seaweedfs.env)
    apply_specs(broker.url, s3_spec(seaweedfs, journal, prefix, retention="1h0m0s"),
                s3_spec(seaweedfs, "prune/forever", prefix))
    bucket = seaweedfs.filesystem()
    with broker.client() as http:
        for name in (journal, "prune/forever"):
            for i in range(4):
                assert put(http, name, record(i)).status_code == 204
            persisted_through(http, name, 3 * len(record(0)))
        later = time.time() + 7200

        def prune(name, **kw):
            resp = http.post("/v1/journals/prune", json={"journal": name, **kw})
            resp.raise_for_status()
            return resp.json()["removed"]

        def stored(name):
            found = bucket.find(f"{seaweedfs.bucket}/{prefix}/{name}/", detail=True)
            return [p for p, info in found.items() if info["type"] == "file"]

        assert prune(journal) == []  # nothing is an hour old yet
        assert len(prune(journal, now=later, dry_run=True)) == 3 and len(stored(journal)) == 3
        removed = prune(journal, now=later)
        assert sorted(f["begin"] for f in removed) == [0, 1 * len(record(0)), 2 * len(record(0))]
        # What is left is the spool: now holding the first byte, it is persisted at once
        # (so readers below it can jump), but nothing pruned remains.
        last = 3 * len(record(0))
        assert all(int(p.rsplit("/", 1)[1].split("-")[0], 16) >= last for p in stored(journal))
        assert prune("prune/forever", now=later) == [] and len(stored("prune/forever")) == 3
        assert read_range(http, journal, last) == record(3)
        assert all(i["fragment"]["begin"] >= last for i in fragments(http, journal))
