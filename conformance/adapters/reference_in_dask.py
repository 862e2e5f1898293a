"""Adapter for the reference's shuffle under dask's own API: ``ddf.shuffle(...,
shuffle_method="device")`` (``reference_impl.shuffle.in_dask``).

The same front end as ``distributed-p2p`` and ``dask-tasks`` (``_dask_frame``): dask checks
the arguments and computes each row's destination (its own hash), and the reference's
transfer, barrier and unpack tasks move the rows. So the three are judged on one footing,
and a finding of dask's front end shows in all three. Manifest
``conformance/expected/reference-in-dask.toml``.
"""

from __future__ import annotations

from conformance.adapters._dask_frame import DaskFrameShuffle
from conformance.api import ShuffleEnv, Unavailable


class ReferenceInDask(DaskFrameShuffle):
    name = "reference-in-dask"
    method = "device"
    capabilities = frozenset(
        {
            "shuffle",
            "shuffle.device",
            "shuffle.bounded",
            "shuffle.spill",
            "shuffle.nulls",
            "shuffle.faults.worker",
            "shuffle.faults.recover",
            "shuffle.checks",
        }
    )

    def __init__(self) -> None:
        import reference_impl

        super().__init__()
        reference_impl.register()  # Tables cross this process's comms too
        self.version = f"reference {getattr(reference_impl, '__version__', 'unknown')}, {self.version}"

    def setup_cluster(self, env: ShuffleEnv) -> None:
        """Each worker's store on the device the suite gave it; the coordinator and the
        worker extension; dask's Shuffle lowered to the reference's tasks."""
        from reference_impl.shuffle import DeviceWorkerPlugin, in_dask

        env.client.register_plugin(
            DeviceWorkerPlugin(device="auto", device_memory_limit=env.device_limit, memory_limit=env.host_limit)
        )
        in_dask.install(env.client)

    def phase_of(self, key: str) -> str | None:
        key = key.strip("('\"")
        for phase in ("transfer", "barrier", "unpack"):
            if key.startswith("devshuffle-") and f"-{phase}" in key:
                return phase
        return None


def adapter() -> ReferenceInDask:
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"dask[dataframe], distributed and pyarrow are needed: {exc!r}") from exc
    return ReferenceInDask()
