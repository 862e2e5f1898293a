"""Shared settings for the library's own tests.

Hypothesis profiles are defined once, in ``conformance/runner/profiles.py`` (``ci``, ``nightly``,
``stress``, registered as ``conformance-<name>``); the library's tests load the same one the
conformance suite would. The profile is named by ``$HYPOTHESIS_PROFILE`` (what ``ci/test.sh``
and ``tox.ini`` set) or ``$CONFORMANCE_PROFILE`` (the conformance plugin's variable); both set
to different names is an error. Default: ``ci`` (derandomized, so CI is deterministic).
"""

from __future__ import annotations

import os

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


@pytest.fixture(scope="session")
def gpu():
    """A CudaDevice on this machine's GPU; skipped without one, failed under
    PROXIFY_REQUIRE_GPU=1 (``tests/gpu_support.py``)."""
    from gpu_support import gpu_device

    return gpu_device()
