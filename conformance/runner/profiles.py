"""Hypothesis profiles for the suite (registered by the plugin, applied per test).

The profiles are registered as ``conformance-ci``, ``conformance-nightly`` and
``conformance-stress`` and are never loaded globally, so the plugin cannot change
the settings of other test suites in the same environment. Conformance tests
obtain their settings from :func:`settings_for`.

Heavy tests (the stateful machine, the thread hammer) divide ``max_examples`` by
``HEAVY_DIVISOR`` so the ``ci`` run of the whole suite stays within minutes.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILES = ("ci", "nightly", "stress")
DEFAULT_PROFILE = "ci"
ENV_VAR = "CONFORMANCE_PROFILE"
HEAVY_DIVISOR = 2
SHUFFLE_DIVISOR = 5  # each shuffle example runs a whole distributed shuffle
# Profiles whose shuffle tests report the first failing example unshrunk: shrinking runs a
# whole shuffle per attempt, hundreds of them (a failing SHUF-NULL-001 ran 70+ shrink
# shuffles in its first two minutes), so one failing implementation took minutes a test
# (explaining the failure re-runs it again and again too).
NO_SHUFFLE_SHRINK = ("ci",)

_BASE = {
    "ci": dict(derandomize=True, max_examples=50, stateful_step_count=25),
    "nightly": dict(derandomize=False, max_examples=500, stateful_step_count=100),
    "stress": dict(derandomize=False, max_examples=5000, stateful_step_count=300),
}


def register_profiles() -> None:
    for name, kw in _BASE.items():
        settings.register_profile(
            f"conformance-{name}",
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            **kw,
        )


def database_path(profile: str, impl_name: str) -> str | None:
    if profile == "ci":
        return None
    return os.path.join(".hypothesis", impl_name)


def settings_for(
    profile: str,
    impl_name: str,
    *,
    heavy: bool = False,
    shuffle: bool = False,
    shrink: str | None = None,
) -> settings:
    """The settings a conformance test runs under, for one implementation; ``shrink`` is a
    mode of :mod:`conformance.runner.shrink` (default: the profile's)."""
    from .shrink import default_mode, phases

    parent = settings.get_profile(f"conformance-{profile}")
    kw = {"phases": phases(shrink or default_mode(profile), parent.phases)}
    path = database_path(profile, impl_name)
    if path is not None:  # explicit and per implementation (see anchors 3.5)
        kw["database"] = DirectoryBasedExampleDatabase(path)
    if heavy:
        kw["max_examples"] = max(5, parent.max_examples // HEAVY_DIVISOR)
    if shuffle:
        kw["max_examples"] = max(5, parent.max_examples // SHUFFLE_DIVISOR)
        if profile in NO_SHUFFLE_SHRINK:
            kw["phases"] = tuple(p for p in kw["phases"] if p not in (Phase.shrink, Phase.explain))
    return settings(parent, **kw)
