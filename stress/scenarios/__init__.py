"""The scenarios: ``run(settings, record, progress, workdir)`` each, registered by name."""

from __future__ import annotations

from collections.abc import Callable

from . import faults, shuffle, store_churn

SCENARIOS: dict[str, Callable] = {
    "store-churn": store_churn.run,
    "shuffle": shuffle.run,
    "faults": faults.run,
}
