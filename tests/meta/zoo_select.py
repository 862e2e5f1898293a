"""A pytest plugin for the zoo's subprocesses (``-p zoo_select``): run only chosen
(conformance ID, implementation) pairs, so that one process can hold several adapters
without each of them running every selected ID.

``$ZOO_PAIRS`` is a JSON list of ``[ID, implementation name]``: the items of the suite that
are not one of those pairs are deselected. Without the variable nothing is.
"""

from __future__ import annotations

import json
import os

ENV = "ZOO_PAIRS"


def pytest_collection_modifyitems(config, items) -> None:
    raw = os.environ.get(ENV)
    if raw is None:
        return
    pairs = {tuple(p) for p in json.loads(raw)}
    keep, drop = [], []
    for it in items:
        mark = it.get_closest_marker("conformance_id")
        impl = it.callspec.params.get("impl") if hasattr(it, "callspec") else None
        if mark is None or impl is None:
            keep.append(it)
            continue
        (keep if (mark.args[0], impl.name) in pairs else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
