"""Gazette's three example applications as Spark jobs: stream-sum, word-count, bike-share.

Each lives in its own package with a ``cli.py`` whose ``app`` is mounted under
``herald examples <name>`` (see ``herald/cli/examples.py``), and a page in ``docs/examples/``.
"""
