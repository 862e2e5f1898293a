"""Shuffle tests marked ``slow`` run only when selected (``-m slow``): each starts
worker processes or compiles kernels for many dtypes, minutes on 2 cores."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "tests/shuffle/" in str(item.fspath) and item.get_closest_marker("slow"):
            item.add_marker(skip)
