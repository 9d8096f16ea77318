"""word-count: a real-time bigram language model with a query API."""
