"""Shared settings for the library's own tests."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The derandomized `ci` profile keeps CI deterministic; `nightly` explores.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=50,
    stateful_step_count=25,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    max_examples=500,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
