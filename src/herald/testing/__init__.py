"""Test helpers as a product (a pytest plugin users can load too).

``herald.testing.plugin`` provides fixtures: ``broker`` (a real ``herald serve``
process on a free loopback port, in a temp data dir) and ``broker_factory`` for
tests that need to kill, restart or share a fragment root. Every wait has a
deadline and fails loudly.
"""

from herald.testing.broker import BrokerProcess, apply_specs, journal_spec, seed_journal

__all__ = ["BrokerProcess", "apply_specs", "journal_spec", "seed_journal"]
