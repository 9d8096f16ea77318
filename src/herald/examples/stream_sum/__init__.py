"""stream-sum: chunkers publish files, a Spark summer publishes their digests.

Gazette's soak test as a product (docs/examples/stream-sum.md): `chunker`
publishes interleaved chunks of random files, keyed by file id; `summer` is the
Spark job that folds each file's chunks into a `digest.RunningDigest` (a SHA-256
hash chain, whose state fits Spark's state store) and publishes the final sum
exactly once; `verify` checks that each correct sum arrives once, in bounded
time; `run` puts them together; `messages` and `journals` are what they share.
Only `summer` imports pyspark (lazily).

    >>> from herald.examples.stream_sum.digest import file_digest
    >>> file_digest("f", [b"a", b"b"]) == file_digest("f", [b"ab"])
    False
"""
