"""Stress runs: long multi-worker runs with faults and tight limits, checked for lost data.

``python -m stress SCENARIO ...`` (or ``proxify-stress``). Every implementation is driven
through the conformance adapters, so peers face exactly the same runs.
"""

from __future__ import annotations

__all__ = ["SCENARIO_NAMES"]

SCENARIO_NAMES = ("store-churn", "shuffle", "faults")
