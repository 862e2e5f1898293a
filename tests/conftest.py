"""Shared settings for the library's own tests.

Hypothesis profiles are defined once, in ``conformance/runner/profiles.py`` (``ci``, ``nightly``,
``stress``, registered as ``conformance-<name>``); the library's tests load the same one the
conformance suite would. The profile is named by ``$HYPOTHESIS_PROFILE`` (what ``ci/test.sh``
and ``tox.ini`` set) or ``$CONFORMANCE_PROFILE`` (the conformance plugin's variable); both set
to different names is an error. Default: ``ci`` (derandomized, so CI is deterministic).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from conformance.runner.profiles import DEFAULT_PROFILE, ENV_VAR, PROFILES, register_profiles

ENV_VARS = ("HYPOTHESIS_PROFILE", ENV_VAR)


def selected_profile(environ=os.environ) -> str:
    named = {var: environ[var] for var in ENV_VARS if environ.get(var)}
    if len(set(named.values())) > 1:
        raise pytest.UsageError(
            "hypothesis profile named twice, differently: "
            + ", ".join(f"{k}={v!r}" for k, v in named.items())
        )
    name = next(iter(named.values()), DEFAULT_PROFILE)
    if name not in PROFILES:
        raise pytest.UsageError(
            f"{' / '.join(named)}={name!r}: expected one of {', '.join(PROFILES)}"
        )
    return name


register_profiles()
settings.load_profile(f"conformance-{selected_profile()}")


# Folders whose tests collect garbage over a frozen heap (measured, see frozen_heap).
FROZEN_HEAP_DIRS = ("store", "table")


@pytest.fixture(scope="module")
def frozen_heap():
    """Collections skip what was alive when the module started (one full collection, then
    ``gc.freeze``): tests/store and tests/table collect garbage before reading a ledger,
    and a full pass over pytest's, hypothesis's and dask's objects cost 0.1-0.7 s each
    (148 s of their collections at a load of 6, 36 s frozen). What the module's tests
    allocate is still collected. Elsewhere the one full collection per module would cost
    more than it saves."""
    from conformance.runner.heap import freeze_what_is_alive, thaw

    freeze_what_is_alive()
    yield
    thaw()


def pytest_collection_modifyitems(config, items) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        if item.path.parent.name in FROZEN_HEAP_DIRS and item.path.parent.parent == tests:
            item.fixturenames.insert(0, "frozen_heap")


@pytest.fixture(scope="session")
def gpu():
    """A CudaDevice on this machine's GPU; skipped without one, failed under
    PROXIFY_REQUIRE_GPU=1 (``tests/gpu_support.py``)."""
    from gpu_support import gpu_device

    return gpu_device()
