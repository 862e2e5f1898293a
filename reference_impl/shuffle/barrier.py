"""The barrier: every transfer task has finished, so every shard is at its worker.

A transfer task returns only after its sends were acknowledged, and a receiver
acknowledges only after the shards are in its output buffers. The barrier adds up
the rows sent to each output; unpack checks it received exactly that many, so a
lost or duplicated shard is an error, never a wrong result.
"""

from __future__ import annotations

from .errors import ShuffleClosedError
from .spec import ShuffleSpec


def barrier(spec: ShuffleSpec, *results: dict) -> ShuffleSpec:
    """Task: the spec with the rows expected per output, which unpack checks.

    A transfer that failed returned its ShuffleError; the first cause is raised here
    (a worker's own failure before another's "the shuffle is failed there")."""
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        errors.sort(key=lambda e: isinstance(e, ShuffleClosedError))
        raise errors[0].copy()
    rows = [0] * spec.npartitions
    for r in results:
        for i, n in enumerate(r["rows"]):
            rows[i] += n
    return spec.with_rows(rows)
