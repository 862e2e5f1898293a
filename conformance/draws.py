"""Draws that depend on the seed alone: hypothesis' pool of "local constants" pinned empty.

Hypothesis (6.131 on) mixes into about 5% of its integer, float, string and bytes draws
constants it reads from the source of every *local* module in ``sys.modules`` at the time
of the draw (``hypothesis.internal.conjecture.providers._get_local_constants``). The pool
only grows as modules are imported, so under the ``ci`` profile's ``derandomize`` the same
test drew different cases depending on what ran before it in the process: after the
reference's shuffle (which imports ``reference_impl``'s modules) the pool held 999
constants, without it 709, and the dask peers drew a case that hits a documented defect
only when the reference ran first (issue 45). Editing any literal in any local module
changed every draw too. With the pool empty a seed gives the same cases in any order, in
any xdist worker, at any commit of unrelated code; hypothesis' own constants stay.

This uses a private hypothesis interface (there is no public switch); :func:`pinned`
checks that it is still there and fails loudly if it is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def _providers():
    from hypothesis.internal.conjecture import providers

    missing = [a for a in ("_get_local_constants", "CONSTANTS_CACHE", "Constants")
               if not hasattr(providers, a)]  # fmt: skip
    if missing:
        raise RuntimeError(
            f"hypothesis changed: providers lacks {missing}; the suite cannot pin the local "
            "constants its draws depend on (conformance/runner/draws.py)"
        )
    return providers


@contextmanager
def pinned() -> Iterator[None]:
    """Within: hypothesis draws no local constants (its constant cache cleared on entry and
    exit, so nothing computed outside leaks in or out)."""
    providers = _providers()
    real = providers._get_local_constants
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = real
        providers.CONSTANTS_CACHE.cache.clear()
