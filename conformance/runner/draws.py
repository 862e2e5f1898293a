"""Every conformance test draws with hypothesis' local-constant pool pinned empty
(:mod:`conformance.draws` says why: issue 45, verdicts that depended on test order)."""

from __future__ import annotations

import pytest

from ..draws import pinned


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Every conformance test draws with the pool pinned (other suites' tests as they were)."""
    if item.get_closest_marker("conformance_id") is None:
        return (yield)
    with pinned():
        return (yield)
