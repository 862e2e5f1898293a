"""``shuffle(client, inputs, on, npartitions)`` and ``shuffle_dataframe(ddf, on, npartitions)``.

The graph is explicit-comms shaped: one transfer task per worker holding
inputs (preferring that worker, free to move once it is gone), one barrier, and one
unpack task per output (restricted by the coordinator to the worker its run placed the
output on), all on dask.distributed's own scheduler. Nothing is submitted
until the inputs have been described and checked (:mod:`.plan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import distributed
from distributed import Client, Future

from . import plan as planning
from .barrier import barrier
from .comms import send_retries
from .install import ensure_plugins, max_restarts
from .messages import REGISTER_OP
from .spec import ShuffleSpec, new_shuffle_id
from .transfer import transfer
from .unpack import unpack


def _as_futures(client: Client, inputs: Any) -> list[Future]:
    from dask import is_dask_collection

    if is_dask_collection(inputs):
        persisted = client.persist(inputs)
        futures = distributed.futures_of(persisted)
        return sorted(futures, key=lambda f: _key_order(f.key))
    items = list(inputs)
    for i, item in enumerate(items):
        if not isinstance(item, Future):
            raise TypeError(
                f"input {i} is a {type(item).__name__}; pass futures of Tables "
                "(client.scatter / client.submit) or a dask collection of them"
            )
    return items


def _key_order(key: Any) -> Any:
    return key[1:] if isinstance(key, tuple) else (key,)


def shuffle(
    client: Client, inputs: Any, on: str | Sequence[str], npartitions: int
) -> list[Future]:
    """Hash-partition ``inputs`` (futures of Tables, or a dask collection of them) by
    the key columns ``on`` into ``npartitions`` Tables; output ``i`` is at index ``i``.

    Equal keys (nulls, NaNs and -0.0 included) land in the same output; rows keep
    their input order within an output; each run places the outputs over the sorted
    workers it starts on. Bad input raises here, before any data moves. A worker lost
    mid-shuffle restarts it on the workers left (``reference-impl.shuffle.max-restarts``
    times at most); past that, or when an input lived only on that worker (scattered to
    it), the outputs raise a ShuffleError naming the phase and every lost worker.
    """
    futures = _as_futures(client, inputs)
    try:
        keys = planning.check_arguments(len(futures), on, npartitions)
        described = client.gather(client.map(planning.describe_input, futures, pure=False))
        schema = planning.check_schemas(described, keys)
        planning.check_types(schema, keys, npartitions)
        workers = ensure_plugins(client)
    except BaseException:
        # An input's error is raised as the object the client keeps for that future, and
        # the raise adds this frame to its traceback: the frame must not hold the inputs'
        # futures, or the client would keep them (and their data) for good.
        inputs = futures = None  # noqa: F841
        raise
    shuffle_id = new_shuffle_id()
    holders = client.who_has(futures)
    by_worker: dict[str, list[int]] = {}
    for i, f in enumerate(futures):
        holding = sorted(holders.get(f.key, ()))
        where = next((w for w in holding if w in workers), None) or workers[i % len(workers)]
        by_worker.setdefault(where, []).append(i)

    send_retries()  # read again on each worker as it sends; a bad value fails here first
    spec = ShuffleSpec(shuffle_id, tuple(keys), npartitions, schema)
    transfer_keys = {w: spec.transfer_key(n) for n, w in enumerate(sorted(by_worker))}
    unpack_keys = spec.unpack_keys
    client.sync(
        getattr(client.scheduler, REGISTER_OP),
        shuffle_id=shuffle_id,
        npartitions=npartitions,
        barrier=spec.barrier_key,
        transfers=list(transfer_keys.values()),
        unpacks=unpack_keys,
        client=client.id,
        max_restarts=max_restarts(),
    )
    # Each transfer where its inputs are, but not pinned there: after a worker left, its
    # inputs are computed again elsewhere and so is its transfer. Each unpack runs where
    # the coordinator's run placed its output (it restricts them when a run starts).
    transfers = [
        client.submit(
            transfer,
            spec,
            indices,
            *[futures[i] for i in indices],
            key=transfer_keys[w],
            workers=[w],
            allow_other_workers=True,
            pure=False,
        )
        for w, indices in sorted(by_worker.items())
    ]
    done = client.submit(barrier, spec, *transfers, key=spec.barrier_key, pure=False)
    del transfers
    return [client.submit(unpack, done, i, key=unpack_keys[i], pure=False) for i in range(npartitions)]


def shuffle_dataframe(
    ddf: Any, on: str | Sequence[str], npartitions: int | None = None, *, client: Client | None = None
) -> Any:
    """Shuffle a pandas- or cuDF-backed dask DataFrame by ``on`` into ``npartitions``
    partitions (default: as many as it has), through device Tables; returns one.

    The index travels as a column and is restored; partitions are cast to ``meta``'s
    Arrow schema on the way in and to its dtypes on the way out (:mod:`.frames`, as the lazy
    path does, without its carriers: a dtype a Table cannot hold is refused here).
    """
    import dask
    import dask.dataframe as dd

    from .frames import arrow_schema_of, check_frame_schema, to_frame, to_table

    client = client or distributed.get_client()
    meta = ddf._meta
    keys = planning.check_arguments(ddf.npartitions, on, npartitions or ddf.npartitions)
    missing = [k for k in keys if k not in meta.columns]
    if missing:
        from reference_impl.table import ColumnNotFoundError

        raise ColumnNotFoundError(missing, [str(c) for c in meta.columns])
    check_frame_schema(meta)
    schema = arrow_schema_of(meta)
    frames = client.compute(ddf.to_delayed())
    n = len(frames)
    tables = client.map(to_table, frames, [meta] * n, [schema] * n, range(n), pure=False)
    del frames
    outputs = shuffle(client, tables, keys, npartitions or ddf.npartitions)
    parts = [dask.delayed(to_frame)(out, meta) for out in outputs]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)
