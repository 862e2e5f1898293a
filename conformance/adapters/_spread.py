"""Putting a shuffle's input tables on the workers, as every built-in shuffle adapter does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conformance.api import ShuffleEnv

WORKERS_TIMEOUT = 60.0  # seconds to wait for env.n_workers (a killed worker's nanny restarts it)


def workers(env: ShuffleEnv, timeout: float = WORKERS_TIMEOUT) -> list[str]:
    """The workers' addresses, sorted, asked of the scheduler itself once ``env.n_workers``
    of them run (or ``timeout`` passed, with at least one).

    Not ``client.scheduler_info()["workers"]``: that returns the client's cache, which its
    periodic refresh (``n_workers=0``) can replace with one listing no workers between the
    fetch and the return; under load a round-robin over it divided by zero.
    """
    client = env.client
    try:
        client.wait_for_workers(env.n_workers, timeout=timeout)
    except TimeoutError:
        pass  # fewer than expected: spread over those there are
    found = sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])
    if not found:
        raise RuntimeError(f"the cluster has no workers after {timeout:.0f} s")
    return found


def spread(env: ShuffleEnv, fn: Callable[[Any], Any], tables: Sequence[Any]) -> list[Any]:
    """``fn(table)`` as a task per input, round-robin over the workers and not pinned: pinned,
    an input lost with its worker would wait for that worker forever instead of being
    computed again elsewhere."""
    names = workers(env)
    return [
        env.client.submit(
            fn, t, workers=[names[i % len(names)]], allow_other_workers=True, pure=False
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
