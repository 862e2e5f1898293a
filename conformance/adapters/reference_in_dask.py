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
from conformance.adapters.reference import ReferenceAdapter
from conformance.api import ShuffleEnv, Unavailable


class ReferenceInDask(DaskFrameShuffle):
    name = "reference-in-dask"
    method = "device"
    # the reference's own shuffle, so its shuffle capabilities and its phases' task keys; a
    # dask collection's partitions are computed as the shuffle runs (shuffle.lazy, 14.12)
    capabilities = frozenset(
        {c for c in ReferenceAdapter.capabilities if c.startswith("shuffle")} | {"shuffle.lazy", "shuffle.destinations", "shuffle.dask"}
    )
    phase_of = ReferenceAdapter.phase_of

    def __init__(self) -> None:
        import reference_impl

        super().__init__()
        reference_impl.register()  # Tables cross this process's comms too
        self.version = f"reference {getattr(reference_impl, '__version__', 'unknown')}, {self.version}"

    def setup_cluster(self, env: ShuffleEnv) -> None:
        """The reference's set-up (each worker's store on the suite's device, the shuffle
        extension), then dask's Shuffle lowered to the reference's tasks."""
        from reference_impl.shuffle import in_dask

        ReferenceAdapter.setup_cluster(self, env)
        in_dask.install(env.client)


def adapter() -> ReferenceInDask:
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise Unavailable(f"dask[dataframe], distributed and pyarrow are needed: {exc!r}") from exc
    return ReferenceInDask()
