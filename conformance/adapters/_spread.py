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


def on_holders(
    env: ShuffleEnv,
    fn: Callable[..., Any],
    outputs: Sequence[Any],
    *,
    keep_errors: bool = False,
    **kwargs: Any,
) -> list[Any]:
    """``fn(output, **kwargs)`` as a task on the worker that holds each output.

    A read that dask placed elsewhere (work stealing) would move the table between workers,
    and the suite measures the shuffle, not dask's transfers. A failed shuffle raises its own
    error here, before anything is submitted: reads that depend on erred outputs, released at
    once by the raise, stayed wanted by the client on the scheduler (seen in the stress faults
    run). ``keep_errors`` submits the reads of erred outputs too, for a caller that looks at
    each read's error itself.
    """
    import distributed

    client = env.client
    with client.as_current():
        distributed.wait(outputs)
    for out in outputs:
        if out.status == "error" and not keep_errors:
            out.result()
    holders = client.who_has(outputs)
    return [
        client.submit(
            fn,
            out,
            workers=sorted(holders.get(out.key, ())) or None,
            allow_other_workers=False,
            pure=False,
            **kwargs,
        )
        for out in outputs
    ]
