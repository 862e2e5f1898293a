"""The barrier: every transfer task has finished, so every shard is at its worker.

A transfer task returns only after its sends were acknowledged, and a receiver
acknowledges only after the shards are registered in its store. The barrier
adds up the rows sent to each output; unpack checks it received exactly that
many, so a lost or duplicated shard is an error, never a wrong result.
"""

from __future__ import annotations

from typing import Any

from .errors import ShuffleClosedError


def barrier(shuffle_id: str, spec: dict[str, Any], *results: dict) -> dict[str, Any]:
    """Task: the expected rows per output, with the placement and schema unpack needs.

    A transfer that failed returned its ShuffleError; the first cause is raised here
    (a worker's own failure before another's "the shuffle is failed there")."""
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        errors.sort(key=lambda e: isinstance(e, ShuffleClosedError))
        e = errors[0]
        raise type(e)(e.shuffle_id, e.phase, e.worker, e.reason)
    rows = [0] * spec["npartitions"]
    for r in results:
        for i, n in enumerate(r["rows"]):
            rows[i] += n
    return {
        "shuffle_id": shuffle_id,
        "rows": rows,
        "placement": spec["placement"],
        "schema": spec["schema"],
    }
