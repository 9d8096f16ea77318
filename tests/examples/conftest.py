"""Fixtures of the example tests: a fresh PostgreSQL database per test."""

from __future__ import annotations

import itertools

import pytest

_numbers = itertools.count()


@pytest.fixture
def bike_db(postgres) -> str:
    """The DSN of a new, empty database on the session's PostgreSQL server."""
    import psycopg

    name = f"bikes_{next(_numbers)}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres.dsn.rsplit("/", 1)[0] + f"/{name}"
