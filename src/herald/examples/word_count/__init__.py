"""word-count: a real-time bigram language model with a query API (Gazette's example, on Spark).

Documents go in (`documents`: one UTF-8 file, one message, to
``word-count/docs/part-NNN``); a Spark streaming job (`job`) keeps every
bigram's count in the RocksDB state store and publishes each changed count
exactly once (`output`) to ``word-count/counts/part-NNN``; a query service
(`service`, fed by `follower` into `model`) answers over HTTP JSON; `tokens`
is the one definition of words and bigrams; `cli` is ``herald examples
word-count``; `demo` is ``make example-word-count``. Walkthrough:
docs/examples/word-count.md.

    herald examples word-count setup && herald examples word-count publish *.txt
    herald examples word-count run --checkpoint /tmp/wc && herald examples word-count serve &
    herald examples word-count query --prefix "the city"
"""
