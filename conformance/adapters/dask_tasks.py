"""Adapter for dask's task-based shuffle: ``ddf.shuffle(..., shuffle_method="tasks")``.

Findings and deviations: ``docs/findings/dask-tasks.md``; manifest
``conformance/expected/dask-tasks.toml``. The task shuffle keeps every intermediate in worker
memory (the suite's workers have no memory limit, so nothing spills): no ``shuffle.bounded``
and no ``shuffle.spill``. It has no barrier; its phases are the ``group``/``split`` tasks that
cut each input by destination (transfer: their pieces move when the outputs gather them) and
the tasks that concatenate the pieces of one output (unpack).
"""

from __future__ import annotations

from conformance.adapters._dask_frame import DaskFrameShuffle
from conformance.api import SHUFFLE_EXTRA_HINT, Unavailable


class DaskTasks(DaskFrameShuffle):
    name = "dask-tasks"
    method = "tasks"
    capabilities = frozenset(
        {"shuffle", "shuffle.nulls", "shuffle.recover", "shuffle.checks",
         "shuffle.dtypes", "shuffle.nested", "shuffle.lazy", "shuffle.destinations", "shuffle.dask"}
    )

    def phase_of(self, key: str) -> str | None:
        key = key.strip("('\"")
        if key.startswith(("group-", "split-", "stage-")):
            return "transfer"
        if key.startswith("taskshuffle-"):
            return "unpack"
        return None


def adapter() -> DaskTasks:
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"{SHUFFLE_EXTRA_HINT}: {exc!r}") from exc
    return DaskTasks()
