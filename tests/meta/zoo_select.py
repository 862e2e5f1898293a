"""A pytest plugin for the zoo's subprocesses (``-p zoo_select``): run only chosen
(conformance ID, implementation) pairs, so that one process can hold several adapters
without each of them running every selected ID.

``$ZOO_PAIRS`` is a JSON list of ``[ID, implementation name]``: the items of the suite that
are not one of those pairs are deselected. Without the variable nothing is.

An adapter whose bug patches the reference process-wide (``broken_base.PatchesProcess``) is patched
only around its own items, setup and teardown included, so that it never touches another
adapter's tests in the same process.
"""

from __future__ import annotations

import contextlib
import json
import os

import pytest

ENV = "ZOO_PAIRS"


def _impl(item):
    return item.callspec.params.get("impl") if hasattr(item, "callspec") else None


def pytest_collection_modifyitems(config, items) -> None:
    raw = os.environ.get(ENV)
    if raw is None:
        return
    pairs = {tuple(p) for p in json.loads(raw)}
    keep, drop = [], []
    for it in items:
        mark = it.get_closest_marker("conformance_id")
        impl = _impl(it)
        if mark is None or impl is None:
            keep.append(it)
            continue
        (keep if (mark.args[0], impl.name) in pairs else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    patched = getattr(getattr(_impl(item), "adapter", None), "patched", None)
    # Outside a zoo process (no $ZOO_PAIRS) the adapter patched when it was made.
    with patched() if patched is not None and ENV in os.environ else contextlib.nullcontext():
        return (yield)
