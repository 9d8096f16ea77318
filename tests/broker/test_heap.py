"""The broker's heap tuning (herald.broker.heap)."""

import platform

import pytest

from herald.broker.heap import keep_freed_body_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_broker_can_keep_freed_body_memory_on_glibc():
    """`herald serve` asks malloc to keep freed memory for the next large body (a
    process-wide setting; here it only has to be accepted)."""
    assert keep_freed_body_memory()
