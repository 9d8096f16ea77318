"""stream-sum: chunkers publish files, a Spark summer publishes their digests."""
