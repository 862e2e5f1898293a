"""Reproductions marked ``slow`` (they start a dask cluster or copy a whole package) run
only when selected (``-m slow``)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "tests/findings/" in str(item.fspath) and item.get_closest_marker("slow"):
            item.add_marker(skip)
