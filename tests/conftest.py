"""Shared test set-up: Herald's own pytest plugin provides the real-process fixtures."""
