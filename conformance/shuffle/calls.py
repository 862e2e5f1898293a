"""One call into an implementation, guarded: a hang becomes a ShuffleHang after a timeout, and
an error's frames are let go so that what the shuffle made can go too."""

from __future__ import annotations

import concurrent.futures
import gc
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import distributed

from ..futures import wait

SHUFFLE_TIMEOUT = 120.0  # a shuffle that takes longer hangs (clause 14.5)


class ShuffleHang(AssertionError):
    """A call into the implementation did not finish within its timeout (clause 14.5)."""


def load_inputs(adapter: Any, env: Any, client: Any, tables: Sequence[Any], timeout: float) -> Any:
    """``tables`` placed as ``adapter`` wants them (its ``load_inputs``), waited for; a
    ShuffleHang after ``timeout`` seconds. Any cluster with a client and an env will do."""
    loader = getattr(adapter, "load_inputs", None)
    if loader is None:
        return list(tables)
    inputs = call_with_timeout(lambda: loader(list(tables), env), timeout)
    futures = distributed.futures_of(inputs)
    if futures:
        wait(client, futures, timeout)  # not as_current(): a hung call's thread may be in it
    return inputs


def forget_error(exc: BaseException) -> None:
    """An error's frames hold the inputs (and the client the erred outputs): drop them, the
    whole chain's, so that what the shuffle made can go (the suite must not keep it alive)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    gc.collect()


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()``, or a ShuffleHang after ``timeout`` seconds (the call is left running; the
    cluster's close ends it)."""
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="conformance-shuffle")
    fut = pool.submit(fn)
    try:
        result = fut.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        pool.shutdown(wait=False)
        raise ShuffleHang(f"the shuffle did not finish within {timeout:.0f} s") from None
    except BaseException:
        # The error reaches this thread while the pool's thread still runs the call's last
        # lines, its frame holding ``fn`` (and so the inputs ``fn`` closes over): wait for
        # it, so that a caller clearing the error's frames (forget_error) can.
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return result


def compute_partitions(cluster: Any, collection: Any, timeout: float = SHUFFLE_TIMEOUT) -> list[Any]:
    """Every partition of a dask ``collection``, computed on ``cluster`` (never the default
    client); a ShuffleHang after ``timeout`` seconds."""
    client = cluster.env.client
    return call_with_timeout(lambda: client.gather(client.compute(collection.to_delayed())), timeout)
