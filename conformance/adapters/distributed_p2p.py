"""Adapter for distributed's P2P shuffle: ``ddf.shuffle(..., shuffle_method="p2p")``.

Findings and deviations: ``docs/findings/distributed-p2p.md``; manifest
``conformance/expected/distributed-p2p.toml``. The memory budget is P2P's own: its two
per-worker buffers (``distributed.p2p.comm.buffer`` for outgoing shards,
``distributed.p2p.storage.buffer`` for received shards before they are written to disk), set
small through ``cluster_config()`` so that the suite's data is several times the budget.
Shards go to files under the worker's ``local_directory`` (dask-expr builds every DataFrame
P2P shuffle with ``disk=True``), hence ``shuffle.spill``.
"""

from __future__ import annotations

from typing import Any

from conformance.adapters._dask_frame import DaskFrameShuffle
from conformance.api import SHUFFLE_EXTRA_HINT, ShuffleEnv, Unavailable

COMM_BUFFER = 4 * 2**20
STORAGE_BUFFER = 4 * 2**20


class DistributedP2P(DaskFrameShuffle):
    name = "distributed-p2p"
    method = "p2p"
    capabilities = frozenset(
        {
            "shuffle",
            "shuffle.bounded",
            "shuffle.spill",
            "shuffle.nulls",
            "shuffle.recover",
            "shuffle.checks",
            "shuffle.dtypes",
            "shuffle.lazy", "shuffle.destinations", "shuffle.dask",
        }
    )

    def cluster_config(self) -> dict[str, Any]:
        return {
            "distributed.p2p.comm.buffer": COMM_BUFFER,
            "distributed.p2p.storage.buffer": STORAGE_BUFFER,
        }

    def memory_budget(self, env: ShuffleEnv) -> int:
        """What P2P's configuration bounds per worker: its comm and storage buffers."""
        return COMM_BUFFER + STORAGE_BUFFER

    def phase_of(self, key: str) -> str | None:
        """``shuffle-transfer-<token>``, ``shuffle-barrier-<token>``, and the unpack tasks
        ``p2pshuffle-<token>`` (``dask/dataframe/dask_expr/_shuffle.py``, ``P2PShuffle._layer``;
        ``distributed/shuffle/_core.py``, ``barrier_key``)."""
        key = key.strip("('\"")
        if key.startswith("shuffle-transfer-"):
            return "transfer"
        if key.startswith("shuffle-barrier-"):
            return "barrier"
        if key.startswith("p2pshuffle-"):
            return "unpack"
        return None


def adapter() -> DistributedP2P:
    try:
        import dask.dataframe  # noqa: F401
        import distributed.shuffle  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"{SHUFFLE_EXTRA_HINT}: {exc!r}") from exc
    return DistributedP2P()
