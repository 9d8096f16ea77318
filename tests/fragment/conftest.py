"""The commit log tests' shared fixture (`tests.fragment.logged_spools`)."""

from tests.fragment.logged_spools import data_dir  # noqa: F401 — a fixture
