"""Conformance adapter for dask-cuda's explicit-comms shuffle, run on CPU with pandas.

Short name: ``dask-cuda-explicit-comms`` (``--impl=dask-cuda-explicit-comms``). Build the
environment with ``ci/dask-cuda-env.sh`` (dask-cuda 26.2.0, the last release with
explicit-comms; it was removed in 26.6 with JIT-unspill, #1641). Nothing here imports
dask-cuda at module import time; :func:`adapter` raises ``conformance.api.Unavailable``
with the failing import quoted when it cannot be imported.

What is called
--------------
``dask_cuda.explicit_comms.dataframe.shuffle.shuffle(df, column_names, npartitions)``, the
public entry point, with its defaults (``ignore_index=False``, ``batchsize`` from the
``explicit-comms-batchsize`` config, default 1). It is dataframe-library agnostic: it
partitions with dask's ``hash_object_dispatch``/``group_split_dispatch`` and concatenates
with ``dask.dataframe.core._concat``, so a pandas-backed dask DataFrame runs on CPU. The
cuDF-only parts (``get_no_comm_postprocess``'s deep copy, ``get_proxify`` without a
``ProxifyHostFile``) fall back to no-ops by upstream's own checks.

* Inputs: each ``pyarrow.Table`` becomes one pandas partition on a worker
  (``to_pandas(types_mapper=pd.ArrowDtype)``: every column keeps its Arrow type and its
  nulls), spread round-robin and not pinned; ``dd.from_delayed`` makes them one dask
  DataFrame, one partition per input, with ``meta`` from the first input's schema and
  ``verify_meta=False`` (the adapter adds no checks of its own).
* Comms: explicit-comms talks over a ``CommsContext``, one per (client, worker set), cached
  by ``comms.default_comms`` in a ``WeakValueDictionary``. ``setup_cluster`` creates it on
  the suite's client and holds it for the cluster's life, so that every shuffle on that
  cluster uses the one context, as upstream's cache intends (unheld, each shuffle would make
  a new one and leave the old one's endpoints open on the workers). ``shuffle`` runs under
  ``env.client.as_current()``, which is what ``default_comms()`` and ``df.persist()`` find.
* Outputs: the result's partitions (persisted by upstream: one future per partition, keyed
  ``(name, i)``) are turned back into Arrow on their workers with the inputs' schema and
  fetched a batch bounded by the host limit at a time (``_spread.read_outputs``), output
  ``i`` at index ``i``. (Gathering them all in one request made every worker load all it
  holds at once, plus Arrow's serialization copy: an adapter artefact, fixed in issue 24.)

Importing ``dask_cuda`` patches dask (``Shuffle._lower`` and ``dask.base.compute``, see
``patch_shuffle_expression``); the patches act only when the ``explicit-comms`` config is
set, which the adapter never sets.

Capabilities (see docs/findings/dask-cuda-explicit-comms.md): ``shuffle`` and
``shuffle.nulls`` only. Not declared: ``shuffle.device`` (pandas on CPU), ``shuffle.bounded``
and ``shuffle.spill`` (no memory budget to declare: explicit-comms spills only through a
worker's ``ProxifyHostFile``, and ``batchsize`` bounds rounds, not bytes),
``shuffle.recover`` (no recovery), ``shuffle.checks`` (``shuffle`` validates only ``batchsize``).
No ``phase_of`` hook: one task per worker does transfer and unpack, so no task key names a
phase, and the worker kills every shuffle is judged with are reported "not exercised".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.adapters._spread import read_outputs, spread
from conformance.api import ShuffleEnv, Unavailable

NAME = "dask-cuda-explicit-comms"
INSTALL_HINT = "run ci/dask-cuda-env.sh and use its .venv-daskcuda"


def _import_explicit_comms() -> dict[str, Any]:
    try:
        from dask_cuda.explicit_comms import comms
        from dask_cuda.explicit_comms.dataframe.shuffle import shuffle
    except ImportError as exc:
        raise Unavailable(
            f"dask-cuda explicit-comms cannot be imported ({type(exc).__name__}: {exc}); "
            f"{INSTALL_HINT}"
        ) from exc
    except Exception as exc:  # e.g. a CUDA probe failing at import time
        raise Unavailable(
            f"dask-cuda explicit-comms failed to import ({type(exc).__name__}: {exc}); "
            f"{INSTALL_HINT}"
        ) from exc
    return {"comms": comms, "shuffle": shuffle}


def _version() -> str:
    from importlib.metadata import version

    return version("dask-cuda")


class _Inputs(list):
    """The input partitions as futures (the suite waits for them), with their schema."""

    schema: Any = None


class DaskCudaExplicitCommsAdapter:
    name = NAME
    capabilities = frozenset({"shuffle", "shuffle.nulls"})
    accepts_worker_tables = True  # load_inputs also takes a conformance.api.WorkerTables

    def __init__(self) -> None:
        self._mods = _import_explicit_comms()
        self.version = _version()
        self._comms: dict[str, Any] = {}  # client id -> its CommsContext, held

    def __repr__(self) -> str:
        return f"<DaskCudaExplicitCommsAdapter dask-cuda=={self.version}>"

    def setup_cluster(self, env: ShuffleEnv) -> None:
        """The cluster's CommsContext (explicit-comms' own cache), held while it lives."""
        for cid in [cid for cid, c in self._comms.items() if c.client.status == "closed"]:
            del self._comms[cid]
        self._comms[env.client.id] = self._mods["comms"].default_comms(env.client)

    def load_inputs(self, tables: Sequence[Any], env: ShuffleEnv) -> _Inputs:
        """One pandas partition per table, round-robin over the workers, not pinned."""
        out = _Inputs(spread(env, _to_pandas, tables))
        out.schema = getattr(tables, "schema", None) or (tables[0].schema if tables else None)
        return out

    def shuffle(self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv) -> list:
        return self.shuffle_map(inputs, on, npartitions, env)

    def shuffle_map(
        self, inputs: Any, on: Sequence[str], npartitions: int, env: ShuffleEnv, fn: Any = None
    ) -> list:
        """``shuffle``; with ``fn``, each output's ``fn(arrow table)`` instead, computed on the
        worker that holds the output."""
        import dask.dataframe as dd
        import distributed

        if not isinstance(inputs, _Inputs):  # the tables themselves (no load_inputs)
            inputs = self.load_inputs(list(inputs), env)
        schema = inputs.schema
        meta = _to_pandas(schema.empty_table())
        with env.client.as_current():
            df = dd.from_delayed(list(inputs), meta=meta, verify_meta=False)
            out = self._mods["shuffle"](df, list(on), npartitions)
            # The persisted partitions: futures keyed (name, i) for partition i (each of
            # to_delayed()'s graphs holds them all, behind an alias layer).
            outputs = sorted(distributed.futures_of(out), key=lambda f: f.key[1])
            if [f.key[1] for f in outputs] != list(range(out.npartitions)):
                raise RuntimeError(
                    f"explicit-comms returned partitions {[f.key for f in outputs]} for "
                    f"{out.npartitions} outputs"
                )
            del out, df
        return read_outputs(env, outputs, _to_arrow, schema=schema, fn=fn)


def _to_pandas(table: Any) -> Any:
    """Task: an Arrow table as a pandas DataFrame whose columns keep their Arrow types."""
    import pandas as pd

    return table.to_pandas(types_mapper=pd.ArrowDtype)


def _to_arrow(df: Any, schema: Any, fn: Any = None) -> Any:
    """Task: an output partition as Arrow with the inputs' schema, metadata included (and
    ``fn`` of it): ``from_pandas`` adds pandas' own metadata, which the inputs never had."""
    from conformance.adapters._dask_frame import to_arrow

    table = to_arrow(df, schema)
    return table if fn is None else fn(table)


def adapter() -> DaskCudaExplicitCommsAdapter:
    """Factory for ``--impl``: raises ``Unavailable`` where explicit-comms cannot be imported."""
    return DaskCudaExplicitCommsAdapter()


__all__ = ["DaskCudaExplicitCommsAdapter", "adapter"]
