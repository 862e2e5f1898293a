"""Reserved implementation names whose adapters do not exist yet."""

from __future__ import annotations

from conformance.api import Unavailable


def distributed_p2p():
    raise Unavailable(
        "the distributed-p2p shuffle adapter is not available yet (shuffle tests pending)"
    )


def dask_tasks():
    raise Unavailable("the dask-tasks shuffle adapter is not available yet (shuffle tests pending)")
