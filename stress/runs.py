"""One shuffle through an adapter: inputs loaded (made on the workers where the adapter
takes them so), the shuffle under a hang guard, the per-worker device high-water marks and
RSS growth, and the checks on what came out (on the workers, where the adapter can map its
outputs there)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from conformance.futures import wait
from conformance.shuffle.harness import (
    RssSampler,
    call_with_timeout,
    device_peak,
    load_inputs,
    reset_device_peak,
)
from conformance.shuffle.harness import ShuffleHang as Hang  # noqa: F401 - stress's name for it

from . import data


def load(cluster: Any, tables: Sequence[pa.Table], timeout: float) -> Any:
    """The inputs placed as the adapter wants them, waited for."""
    return load_inputs(cluster.adapter, cluster.env, cluster.client, tables, timeout)


def on_workers(cluster: Any) -> bool:
    """Whether inputs are made and outputs summarised on the workers: the adapter takes
    ``WorkerTables`` and has ``shuffle_map`` (the built-in ones do)."""
    adapter = cluster.adapter
    return bool(getattr(adapter, "accepts_worker_tables", False)) and callable(
        getattr(adapter, "shuffle_map", None)
    )


def generate(
    cluster: Any, seed: int, n_inputs: int, rows: int, width: int, timeout: float
) -> tuple[Any, list[data.Summary], pa.Schema]:
    """Inputs made on the workers (``data.make_table`` there, round-robin, not pinned), their
    summaries computed there, and loaded through the adapter's ``load_inputs``; only the
    summaries travel.

    Each table is released once its summary and the adapter's input hold what they need of
    it: this process keeps no future of it, and the priorities run input ``i``'s summary and
    conversion (the adapter's tasks, at the default priority 0) before table ``i + 1`` is
    made, so that a worker never holds every table at once next to the inputs they became.
    """
    import distributed

    from conformance.adapters._spread import workers
    from conformance.api import WorkerTables

    client = cluster.client
    names = workers(cluster.env)
    made = WorkerTables(
        client.submit(
            data.make_table, seed, i, rows, workers=[names[i % len(names)]],
            allow_other_workers=True, pure=False, priority=-2 * (i + 1),
        )
        for i in range(n_inputs)
    )
    made.schema = schema = data.make_table(seed, 0, 0).schema
    sums = [
        client.submit(data.summarize, t, schema.names, width, pure=False, priority=-2 * i - 1)
        for i, t in enumerate(made)
    ]
    held = [made]  # handed over: nothing here holds the tables once load_inputs returned
    del made
    inputs = call_with_timeout(lambda: cluster.adapter.load_inputs(held.pop(), cluster.env), timeout)
    wait(client, distributed.futures_of(inputs), timeout)  # not as_current() (issue 45)
    summaries = client.gather(sums)
    return inputs, summaries, schema


def local_pids(cluster: Any) -> dict[str, int] | None:
    """The workers' pids when they run on this machine (their RSS can be sampled here)."""
    if not getattr(cluster, "local_workers", False):
        return None
    try:
        return cluster.client.run(os.getpid)
    except Exception:
        return None


def _bare(exc: BaseException) -> BaseException:
    """The exception without its tracebacks: their frames would keep the shuffle's input and
    output futures (and so the workers' data) alive."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


@dataclass
class Result:
    outputs: list | None = None
    error: BaseException | None = None
    seconds: float = 0.0
    peaks: dict[str, int] = field(default_factory=dict)
    rss: dict[str, int] = field(default_factory=dict)  # growth per worker (SPEC 14.20)
    rss_before: dict[str, int] = field(default_factory=dict)  # RSS when the shuffle began
    kills: list = field(default_factory=list)  # workers --kill-every killed meanwhile (reaper.Kill)


def shuffle(
    cluster: Any, inputs: Any, npartitions: int, timeout: float, *, measure: bool, fn: Any = None
) -> Result:
    """Run it; a Hang or the shuffle's own exception lands in ``Result.error``. With ``fn``,
    the outputs are ``fn(output)`` computed on the workers (the adapter's ``shuffle_map``).
    With ``measure``: the device high-water marks, and each local worker's RSS growth."""
    on_device = measure and cluster.on_device
    if on_device:
        cluster.client.run(reset_device_peak)
    pids = local_pids(cluster) if measure else None
    sampler = RssSampler(pids) if pids else None
    adapter, env = cluster.adapter, cluster.env
    if fn is None:
        call = lambda: adapter.shuffle(inputs, [data.KEY], npartitions, env)  # noqa: E731
    else:
        call = lambda: adapter.shuffle_map(inputs, [data.KEY], npartitions, env, fn)  # noqa: E731
    start = time.perf_counter()
    res = Result()
    try:
        res.outputs = list(call_with_timeout(call, timeout))
    except Exception as exc:
        res.error = _bare(exc)
    finally:
        if sampler is not None:
            res.rss, res.rss_before = sampler.stop(), dict(sampler.before)
    res.seconds = time.perf_counter() - start
    if on_device:
        res.peaks = cluster.client.run(device_peak, on_error="ignore")
    return res


def check(
    tables_in: Sequence[pa.Table] | None,
    digest_in: data.Digest,
    outputs: Sequence[Any],
    npartitions: int,
    schema: pa.Schema,
) -> list[str]:
    """What is wrong with the outputs: structure, co-location, then per-row checksums."""
    problems = data.output_problems(outputs, npartitions, schema)
    if problems:
        return problems
    names = schema.names
    got = data.digest_all(outputs, names)
    if got != digest_in:
        detail = data.row_diff(tables_in, outputs, names) if tables_in is not None else ""
        problems.append(
            f"per-row checksums differ: in {digest_in.as_dict()}, out {got.as_dict()}"
            + (f" ({detail})" if detail else "")
        )
    return problems
