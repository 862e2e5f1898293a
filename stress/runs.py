"""One shuffle through an adapter: inputs loaded, the shuffle under a hang guard, the
per-worker device high-water marks, and the checks on what came out."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from conformance.shuffle_harness import ShuffleHang as Hang  # noqa: F401 - stress's name for it
from conformance.shuffle_harness import (
    call_with_timeout,
    device_peak,
    load_inputs,
    reset_device_peak,
)

from . import data


def load(cluster: Any, tables: Sequence[pa.Table], timeout: float) -> Any:
    """The inputs placed as the adapter wants them, waited for."""
    return load_inputs(cluster.adapter, cluster.env, cluster.client, tables, timeout)


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


def shuffle(cluster: Any, inputs: Any, npartitions: int, timeout: float, *, measure: bool) -> Result:
    """Run it; a Hang or the shuffle's own exception lands in ``Result.error``."""
    measure = measure and cluster.on_device
    if measure:
        cluster.client.run(reset_device_peak)
    start = time.perf_counter()
    res = Result()
    try:
        res.outputs = list(
            call_with_timeout(
                lambda: cluster.adapter.shuffle(inputs, [data.KEY], npartitions, cluster.env),
                timeout,
            )
        )
    except Exception as exc:
        res.error = _bare(exc)
    res.seconds = time.perf_counter() - start
    if measure:
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
