"""Collections that skip the heap a conformance test found when it started.

The suite collects garbage often (after every machine step, before reading the device
ledger) so that a dropped object's memory is freed when the check runs. A full pass over
pytest's, hypothesis's and dask's objects cost 80-90 ms each time, about 80% of a store
run. Everything alive when a test starts is frozen (``gc.freeze``) for that test, after one
full collection, and thawed when it ends: what the test and its implementation allocate is
collected exactly as before, and only what the test finds alive is skipped.
"""

from __future__ import annotations

import gc

import pytest


def freeze_what_is_alive() -> None:
    gc.collect()
    gc.freeze()


def thaw() -> None:
    gc.unfreeze()


def _judged(item: pytest.Item) -> bool:
    return item.get_closest_marker("conformance_id") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _judged(item):
        freeze_what_is_alive()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _judged(item):
        thaw()
