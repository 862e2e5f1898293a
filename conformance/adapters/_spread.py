"""Putting a shuffle's input tables on the workers, as every built-in shuffle adapter does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conformance.api import ShuffleEnv


def spread(env: ShuffleEnv, fn: Callable[[Any], Any], tables: Sequence[Any]) -> list[Any]:
    """``fn(table)`` as a task per input, round-robin over the workers and not pinned: pinned,
    an input lost with its worker would wait for that worker forever instead of being
    computed again elsewhere."""
    workers = sorted(env.client.scheduler_info(n_workers=-1)["workers"])
    return [
        env.client.submit(
            fn, t, workers=[workers[i % len(workers)]], allow_other_workers=True, pure=False
        )
        for i, t in enumerate(tables)
    ]
