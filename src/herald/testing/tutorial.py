"""The seed tutorial's JournalSpecs ("Brokers: A Tutorial Introduction"), shared by tests
and anyone reproducing the tutorial against Herald."""

from __future__ import annotations

import yaml

#: The tutorial's first journal, exactly as its ``gazctl journals apply`` shows it.
TUTORIAL_SPEC_YAML = """\
name: example/journal
replication: 1
labels:
- name: app.gazette.dev/message-type
  value: TestMessage
- name: app.gazette.dev/region
  value: local
- name: app.gazette.dev/tag
  value: demo
- name: content-type
  value: application/x-ndjson
fragment:
  length: 131072
  compression_codec: SNAPPY
  stores:
  - file:///
  refresh_interval: 1m0s
"""

#: The tutorial's hierarchical example: a ``foobar/`` directory of three partitions.
TUTORIAL_TREE_YAML = """\
name: foobar/
replication: 1
labels:
- name: content-type
  value: application/x-ndjson
- name: my-label
fragment:
  length: 4096
  compression_codec: GZIP
  stores:
  - file:///
  refresh_interval: 1m0s
  flush_interval: 1m0s
children:
  - name: foobar/part-000
  - name: foobar/part-001
  - name: foobar/part-002
"""


def tutorial_spec() -> dict:
    """The tutorial's first journal as a spec dict (a fresh copy each call)."""
    return yaml.safe_load(TUTORIAL_SPEC_YAML)
