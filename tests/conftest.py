"""Shared test set-up: Herald's own pytest plugin provides the real-process fixtures.

Under pytest-xdist (``pytest -n 2 --dist loadgroup``; ``make test`` runs serially), every test that
starts Spark (marked ``spark``, or using the ``spark`` / ``spark_cluster``
fixtures) joins one group, so they run one after another on one worker, as they
did serially, while the other worker runs the rest. Two Spark jobs at once on a
2-core machine would double each one's start-up and put their deadlines at risk.
The group comes first: xdist hands out work in collection order, and the group
(the longest unit, about half the suite's time) started last would run alone.
"""

from __future__ import annotations

import pytest

SPARK_FIXTURES = {"spark", "spark_cluster"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spark = [item for item in items
             if item.get_closest_marker("spark") or SPARK_FIXTURES & set(getattr(item, "fixturenames", ()))]
    if not spark or not hasattr(config, "workerinput"):
        return  # not an xdist worker: the usual order
    for item in spark:
        item.add_marker(pytest.mark.xdist_group("spark"))
    chosen = set(spark)
    items[:] = spark + [item for item in items if item not in chosen]
