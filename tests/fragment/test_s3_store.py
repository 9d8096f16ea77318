"""s3:// fragment stores against real S3 servers: moto for quick round trips,
SeaweedFS where signatures are checked (credentials, profiles, presigned URLs)."""

from __future__ import annotations

import secrets
import time

import httpx
import pytest

from herald.fragment.codecs import decompress
from herald.fragment.persister import persist
from herald.fragment.stores import StoreError, list_fragments, open_store
from herald.protocol.errors import ValidationError
from herald.protocol.fragment import Fragment
from herald.protocol.journal import CompressionCodec
from herald.testing.s3 import free_ports


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """Credentials the default chain finds; no stray shared config from the host."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "herald-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "herald-test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def prefix() -> str:
    return f"t-{secrets.token_hex(4)}"


def spool_file(tmp_path, content: bytes, journal: str = "a/journal") -> tuple[Fragment, str]:
    import hashlib

    path = tmp_path / "spool"
    path.write_bytes(content)
    fragment = Fragment(journal=journal, begin=0, end=len(content),
                        sum=hashlib.sha1(content).hexdigest(), codec=CompressionCodec.SNAPPY)
    return fragment, str(path)


def test_put_exists_get_list_remove_round_trip(moto_s3, tmp_path):
    store = open_store(moto_s3.store_url(prefix()), tmp_path)
    (tmp_path / "f").write_bytes(b"stored bytes")
    store.put("j/one/00-01-aa.raw", tmp_path / "f")
    assert store.exists("j/one/00-01-aa.raw")
    assert store.get("j/one/00-01-aa.raw") == b"stored bytes"
    [(name, mod_time)] = store.list("j/one/")
    assert name == "00-01-aa.raw" and abs(mod_time - time.time()) < 300
    assert store.list("j/on/") == []  # a prefix matches whole path segments only
    store.remove("j/one/00-01-aa.raw")
    assert not store.exists("j/one/00-01-aa.raw") and store.list("j/one/") == []
    with pytest.raises(FileNotFoundError):
        store.get("j/one/00-01-aa.raw")


def test_persisted_spool_is_listed_and_decompresses_to_its_content(moto_s3, tmp_path):
    store = open_store(moto_s3.store_url(prefix()), tmp_path)
    content = b"".join(b"record %d\n" % i for i in range(500))
    fragment, path = spool_file(tmp_path, content)
    persisted = persist(store, fragment, path)
    assert persist(store, fragment, path) == persisted  # idempotent: the name exists
    [listed] = list_fragments(store, "a/journal")
    assert listed == persisted and listed.store == store.url and listed.mod_time > 0
    assert decompress(store.get(listed.content_path), listed.codec) == content


def test_signed_url_is_fetched_by_a_plain_http_get_and_checked(seaweedfs, tmp_path):
    store = open_store(seaweedfs.store_url(prefix()), tmp_path)
    (tmp_path / "f").write_bytes(b"offloaded bytes")
    store.put("j/00-0f-aa.raw", tmp_path / "f")
    url = store.sign_get("j/00-0f-aa.raw", 60)
    assert url.startswith(f"{seaweedfs.endpoint}/{seaweedfs.bucket}/")  # path-style
    assert "X-Amz-Signature=" in url and f"%2F{seaweedfs.region}%2Fs3%2F" in url  # SigV4
    assert httpx.get(url).content == b"offloaded bytes"
    tampered = url.replace("00-0f-aa.raw", "00-0f-ab.raw")
    assert httpx.get(tampered).status_code == 403
    assert httpx.get(url.split("?")[0]).status_code == 403  # unsigned: refused


def test_region_is_used_for_signing(seaweedfs, tmp_path):
    url = seaweedfs.store_url(prefix()).replace("region=us-east-1", "region=eu-west-3")
    store = open_store(url, tmp_path)
    assert "%2Feu-west-3%2Fs3%2F" in store.sign_get("j/x.raw", 60)


def test_wrong_credentials_are_refused_as_permission_error(seaweedfs, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    store = open_store(seaweedfs.store_url(prefix()), tmp_path)
    with pytest.raises(PermissionError):
        store.list("j/")


def test_profile_selects_shared_credentials(seaweedfs, tmp_path, monkeypatch):
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[herald]\naws_access_key_id = {seaweedfs.access_key}\n"
        f"aws_secret_access_key = {seaweedfs.secret_key}\n"
        "[stale]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    base = prefix()
    assert open_store(seaweedfs.store_url(base, profile="herald"), tmp_path).list("j/") == []
    with pytest.raises(PermissionError):
        open_store(seaweedfs.store_url(base, profile="stale"), tmp_path).list("j/")


def test_unreachable_endpoint_fails_fast_as_os_error(tmp_path):
    [port] = free_ports(1)  # nothing listens there
    store = open_store(f"s3://b/p/?endpoint=http://127.0.0.1:{port}&region=us-east-1", tmp_path)
    started = time.monotonic()
    with pytest.raises(StoreError) as err:
        store.exists("j/x.raw")
    assert isinstance(err.value, OSError) and store.url in str(err.value)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("url, arg", [
    ("s3://b/p/?endpoint=http://h:1&bogus=1", "bogus"),
    ("s3://b/p/?Region=x&storageclass=STANDARD&colour=red", "colour"),
    ("gs://b/p/?endpoint=http://h:1", "endpoint"),
    ("file:///p/?region=x", "region"),
])
def test_unknown_query_arguments_are_rejected_by_name(url, arg, tmp_path):
    with pytest.raises(ValidationError) as err:
        open_store(url, tmp_path, field="fragment.stores[0]")
    assert err.value.field == "fragment.stores[0]" and repr(arg) in err.value.message


def test_query_argument_names_match_case_insensitively(tmp_path):
    store = open_store("s3://b/p/?ENDPOINT=http://127.0.0.1:9&Region=eu-west-1&Profile=", tmp_path)
    assert store.url.startswith("s3://b/p/")


def test_endpoint_must_be_an_http_url(tmp_path):
    with pytest.raises(ValidationError) as err:
        open_store("s3://b/p/?endpoint=localhost:9000", tmp_path, field="stores[1]")
    assert err.value.field == "stores[1]" and "endpoint" in err.value.message


def test_listing_a_journal_is_one_request_even_when_it_has_no_fragments(moto_s3, tmp_path):
    """A restarted broker lists every journal's store before the journal takes an
    append: on a slow endpoint each round trip counts. s3fs's ``find`` of a prefix
    with no keys asked twice more (HEAD, then a delimited LIST) whether the path was
    an object or a directory; a journal's listing is now one ListObjectsV2."""
    store = open_store(moto_s3.store_url(prefix()), tmp_path)
    fragment, path = spool_file(tmp_path, b"one fragment\n", journal="listed/full")
    persist(store, fragment, path, fragment.codec)
    requests: list[str] = []
    store._fs.s3.meta.events.register("before-send.s3", lambda request, **_: requests.append(request.method))
    assert list_fragments(store, "listed/empty") == []
    assert requests == ["GET"]
    requests.clear()
    assert [f.end for f in list_fragments(store, "listed/full")] == [fragment.end]
    assert requests == ["GET"]
