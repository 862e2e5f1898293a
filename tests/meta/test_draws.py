"""A seed gives the same cases whatever the process imported or ran before (issue 45).

Hypothesis mixes constants read from every local module in ``sys.modules`` into its draws,
so the dask peers drew another SHUF-NULL-001 case, one that hits a documented defect, only
when the reference's shuffle (importing ``reference_impl``) ran first in the process. The
suite pins that pool empty (:mod:`conformance.draws`); on the old code the draws below
change as soon as a module full of constants is imported.
"""

from __future__ import annotations

import importlib
import sys

from hypothesis.internal.conjecture import providers

from conformance.runner import draws as draws_hook
from conformance.runner.profiles import register_profiles, settings_for
from conformance.shuffle.harness import for_each_case
from conformance.shuffle.tables import shuffle_cases

# Literals hypothesis would collect from a local module: ints outside -100..100, short
# strings, nonzero finite floats.
CONSTANTS = [*(1000 + 37 * i for i in range(300)), *(f"s{i}" for i in range(50)), 2.5, -7.25]


def _drawn() -> list[str]:
    register_profiles()
    seen: list[str] = []
    for_each_case(
        settings_for("ci", "draws", shuffle=True),
        shuffle_cases(nulls=True),
        lambda case: seen.append(case.describe()),
    )
    return seen


def test_importing_a_module_full_of_constants_changes_no_draw(tmp_path, monkeypatch):
    before = _drawn()
    (tmp_path / "issue45_constants.py").write_text(f"VALUES = {CONSTANTS!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "issue45_constants", raising=False)
    importlib.import_module("issue45_constants")
    try:
        assert _drawn() == before
    finally:
        sys.modules.pop("issue45_constants", None)


class _ConformanceItem:
    def get_closest_marker(self, name: str) -> object:
        return object() if name == "conformance_id" else None


def test_every_conformance_test_draws_with_the_pool_pinned():
    """The plugin's runtest hook pins the pool for the whole test (stateful machines too,
    which do not go through ``for_each_case``) and restores it after."""
    real = providers._get_local_constants
    call = draws_hook.pytest_runtest_call(_ConformanceItem())
    next(call)
    try:
        inside = providers._get_local_constants()
        assert not (inside.integers or inside.floats or inside.strings or inside.bytes)
    finally:
        try:
            call.send(None)
        except StopIteration:
            pass
    assert providers._get_local_constants is real
