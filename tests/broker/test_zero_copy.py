"""Non-blocking reads held whole in local uncompressed files (spools, NONE-codec
fragments in a file:// store) are sent by sendfile with a Content-Length; every
other read keeps the chunked stream. Bytes and headers are the same either way."""

from __future__ import annotations

import httpx

from herald.client import BrokerClient, RetryReader
from herald.testing import apply_specs, journal_spec
from tests.broker.s3_helpers import persisted_through

RECORD = b"z" * 399_999 + b"\n"  # three make a 1 MiB fragment roll


def _fill(http: httpx.Client, journal: str, codec: str, records: int = 7) -> bytes:
    apply_specs(str(http.base_url), journal_spec(journal, length=1 << 20, compression_codec=codec))
    content = b"".join(RECORD[:-7] + b"%06d\n" % i for i in range(records))
    for i in range(records):
        assert http.put(f"/{journal}", content=content[i * len(RECORD):(i + 1) * len(RECORD)]).status_code == 204
    persisted_through(http, journal, 3 * len(RECORD))
    return content


def test_read_of_spool_and_none_fragments_declares_its_length(broker):
    with broker.client() as http:
        content = _fill(http, "zero/none", "NONE")
        whole = http.get("/zero/none")
        assert whole.status_code == 206
        assert whole.content == content
        assert whole.headers["Content-Length"] == str(len(content))
        assert "Transfer-Encoding" not in whole.headers
        assert whole.headers["X-Write-Head"] == str(len(content))
        assert whole.headers["X-Fragment-Name"].endswith(".raw")
        assert whole.headers["Content-Range"].startswith("bytes 0-")

        cut = http.get("/zero/none", params={"offset": 500_000, "end_offset": 2_500_001})
        assert cut.content == content[500_000:2_500_001]
        assert cut.headers["Content-Range"].startswith("bytes 500000-")
        assert cut.headers["Content-Length"] == str(2_000_001)

        at_head = http.get("/zero/none", params={"offset": len(content)})
        assert at_head.status_code == 416


def test_reads_of_compressed_fragments_and_blocking_reads_stay_chunked(broker):
    with broker.client() as http:
        content = _fill(http, "zero/snappy", "SNAPPY")
        read = http.get("/zero/snappy")
        assert read.content == content
        assert read.headers["Transfer-Encoding"] == "chunked"
    with BrokerClient(broker.url) as client, client.read("zero/snappy", 0, len(content), block=True) as reader:
        assert b"".join(chunk for _, chunk in reader) == content


def test_retry_reader_reads_a_none_journal_whole(broker):
    with broker.client() as http:
        content = _fill(http, "zero/retry", "NONE")
    with BrokerClient(broker.url) as client:
        reader = RetryReader(client, "zero/retry", 0, block=False, end_offset=len(content))
        assert b"".join(chunk for _, chunk in reader) == content
