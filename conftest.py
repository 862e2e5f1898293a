"""Tests marked ``slow`` (under ``tests/`` and ``stress/tests/``) run only when selected with
``-m slow``: each starts worker processes, writes files of gigabytes or kills workers, minutes
on 2 cores. The conformance suite decides its own slow IDs (``conformance/runner/plugin.py``)."""

from __future__ import annotations

import pytest

SLOW_UNDER = ("tests/", "stress/tests/")


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        path = str(item.path.relative_to(config.rootpath)) if item.path.is_relative_to(config.rootpath) else ""
        if path.startswith(SLOW_UNDER) and item.get_closest_marker("slow"):
            item.add_marker(skip)
