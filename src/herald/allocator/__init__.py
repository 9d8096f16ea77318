"""Assigning journals to brokers: a pure solver and the etcd driver that applies it.

    desired = solve(members, {"a/journal": 3}, current_assignments)
    desired["a/journal"].members  # (primary, replica, replica), spread over zones
"""

from herald.allocator.solver import Desired, solve

__all__ = ["Desired", "solve"]
