"""The machine's failures, not the implementation's: a judged test whose body fails because the
environment did (``conformance.EnvironmentFailure``: a nanny that never brought a killed worker
back) runs its body once more, and its report says so.

The second run's verdict is the cell's; the first run's failure goes into the junit properties
(``conformance_environment_rerun``) and the report's note, so an environment that fails often
is seen, never counted against the implementation and never silently green. The body runs again
with the same fixtures: the one raiser, the shuffle machine, builds its cluster inside the body.
"""

from __future__ import annotations

import pytest

from .. import EnvironmentFailure
from .manifests import leaf_chains
from .report import ENVIRONMENT_RERUN


def environment_failure(exc: BaseException) -> EnvironmentFailure | None:
    """The EnvironmentFailure anywhere in ``exc``'s chains or groups (hypothesis wraps a
    failure in its own errors, and a machine's in an ExceptionGroup), else None."""
    chains = leaf_chains(exc)
    return next((e for c in chains for e in c if isinstance(e, EnvironmentFailure)), None)


@pytest.hookimpl(wrapper=True, trylast=True)  # innermost: the rerun's failure is judged as usual
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except Exception as exc:
        found = environment_failure(exc) if _judged(item) else None
        if found is None:
            raise
        item.user_properties.append((ENVIRONMENT_RERUN, f"{type(found).__name__}: {found}"))
        return item.runtest()


def _judged(item: pytest.Item) -> bool:
    return item.get_closest_marker("conformance_id") is not None
