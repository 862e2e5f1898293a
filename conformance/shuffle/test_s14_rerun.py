"""Clause 14.29: a collection shuffled through dask's API computed again, after its input failed
or at once with itself. dask's keys are deterministic, so a retry or a second ``compute()``
meets the same shuffle: what one compute left must never reach, or outlive, another."""

from __future__ import annotations

import itertools
import time

import pytest

from conformance import conformance_id, extras, requires
from conformance.shuffle.calls import (
    SHUFFLE_TIMEOUT,
    call_with_timeout,
    compute_partitions,
    forget_error,
)
from conformance.shuffle.judge import error_names

NPARTITIONS = 3
INPUTS = 4


def _shuffled(cluster, flag: str, npartitions: int = NPARTITIONS) -> tuple[object, dict[int, int]]:
    """The collection of ``INPUTS`` inputs of ``frames.flaky_input`` (input 1 raises while the
    file ``flag`` exists) shuffled through the method into ``npartitions``, and the key of every
    row it must give."""
    import dask.dataframe as dd

    pd, f = extras.pandas(), extras.frames()
    ddf = dd.from_map(f.flaky_input, range(INPUTS), flag=flag, meta=f.flaky_input(0, "", 0))
    out = ddf.shuffle(f.KEY, npartitions=npartitions, shuffle_method=cluster.adapter.dask_method, force=True)
    frame = pd.concat([f.flaky_input(i, "") for i in range(INPUTS)])
    return out, dict(zip(frame[f.ROW].tolist(), frame[f.KEY].tolist(), strict=True))


def _problems(
    parts: list, want: dict[int, int], what: str, npartitions: int = NPARTITIONS
) -> tuple[list[str], dict[int, int]]:
    """14.1, 14.6 and 14.7 of one compute; the output of every row."""
    f = extras.frames()
    problems = []
    if len(parts) != npartitions:
        problems.append(f"{what}: {len(parts)} outputs, not {npartitions}")
    where: dict[int, int] = {}
    keys: dict[int, set[int]] = {}
    for i, part in enumerate(parts):
        for row, key in zip(part[f.ROW].tolist(), part[f.KEY].tolist(), strict=True):
            if row in where:
                problems.append(f"{what}: row {row} in outputs {where[row]} and {i}")
            where[row] = i
            keys.setdefault(key, set()).add(i)
            if want.get(row) != key:
                problems.append(f"{what}: row {row} holds key {key}, the input {want.get(row)}")
    missing = sorted(set(want) - set(where))
    if missing:
        problems.append(f"{what}: {len(missing)} rows missing, e.g. {missing[:5]}")
    split = {k: sorted(v) for k, v in keys.items() if len(v) > 1}
    if split:
        problems.append(f"{what}: equal keys in several outputs: {split}")
    return problems[:6], where


@conformance_id("SHUF-RERUN-001", clause=("14.29", "14.1", "14.6", "14.7", "14.9", "14.11"))
@requires("shuffle", "shuffle.dask")
def test_a_shuffle_is_computed_again_after_its_input_failed(impl, shuffle_cluster, tmp_path, record_detail):
    """One input raises while a flag file exists: the compute raises its error; the flag goes,
    the same collection is computed twice more, each time whole and alike."""
    flag = tmp_path / "input-fails"
    flag.touch()
    out, want = _shuffled(shuffle_cluster, str(flag))
    with pytest.raises(Exception) as info:  # noqa: PT011 - the input's own error, any type
        compute_partitions(shuffle_cluster, out)
    raised = info.value
    named, what = error_names(raised, "failed on purpose"), f"{type(raised).__name__}: {raised}"
    forget_error(raised)
    del info, raised
    assert named, f"the input's error is not what the compute raised (nor in its chain): {what}"
    left = shuffle_cluster.settled(timeout=10.0)
    assert left is None, f"left behind by the failed compute (14.11): {left[:8]}"

    flag.unlink()
    problems, first = _problems(compute_partitions(shuffle_cluster, out), want, "computed again")
    assert not problems, "; ".join(problems)
    problems, second = _problems(compute_partitions(shuffle_cluster, out), want, "a third time")
    assert not problems, "; ".join(problems)
    moved = sorted(r for r in first if first[r] != second.get(r))
    assert not moved, f"rows in another output the third time (14.9): {moved[:5]}"
    left = shuffle_cluster.settled(timeout=10.0)
    assert left is None, f"left behind after the computes (14.11): {left[:8]}"
    record_detail(f"{len(want)} rows, 3 computes")


def _scheduler_tasks(dask_scheduler=None) -> list[str]:
    return sorted(str(k) for k in dask_scheduler.tasks)


@conformance_id("SHUF-RERUN-002", clause=("14.29", "14.1", "14.6", "14.7", "14.9", "14.11"))
@requires("shuffle", "shuffle.dask")
def test_a_shuffle_computed_twice_at_once(impl, shuffle_cluster, record_detail):
    """Two computes of one collection, the second asked for before the first returns and
    holding two other shuffles of the same inputs too: all whole, the twice-computed one alike, and
    once all are released the scheduler holds none of their tasks (tasks it held before,
    another test's, do not count)."""
    out, want = _shuffled(shuffle_cluster, "")
    # Two more: the scheduler takes a graph's shuffles in an order of its own (a walk over sets
    # of keys), and a method that stops at the held one must meet one after it.
    sizes = [NPARTITIONS - 1, NPARTITIONS + 2]
    others = [_shuffled(shuffle_cluster, "", n)[0] for n in sizes]
    client = shuffle_cluster.env.client
    before = set(client.run_on_scheduler(_scheduler_tasks))

    def twice() -> tuple[list, list]:
        first = client.compute(out.to_delayed())
        second = client.compute([*(d for o in others for d in o.to_delayed()), *out.to_delayed()])
        return client.gather(first), client.gather(second)

    first, second = call_with_timeout(twice, SHUFFLE_TIMEOUT)
    problems, a = _problems(first, want, "the first compute")
    ends = list(itertools.accumulate([*sizes, NPARTITIONS]))
    parts = [second[a:b] for a, b in zip([0, *ends], ends, strict=False)]
    more, b = _problems(parts[-1], want, "the second compute")
    for part, n in zip(parts, sizes, strict=False):
        more += _problems(part, want, f"the shuffle into {n} beside it", n)[0]
    assert not problems + more, "; ".join(problems + more)
    assert a == b, "the two computes put rows in different outputs (14.9)"
    del first, second
    left = shuffle_cluster.settled(timeout=10.0)
    assert left is None, f"left behind after the computes (14.11): {left[:8]}"
    deadline = time.monotonic() + 10.0
    while (held := sorted(set(client.run_on_scheduler(_scheduler_tasks)) - before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not held, f"the scheduler still holds {len(held)} tasks: {held[:4]}"
    record_detail(f"{len(want)} rows, 2 computes at once, the second with 2 more shuffles")
