"""Clause 14.26: a shuffle by given destinations. Each row goes to the output its
destination column names; a bad destination is refused naming the column, and the inputs
are intact after. (dask's set_index, sort_values, merge and hash shuffles all lower to such
a shuffle: dask computes the destinations, the shuffle method moves the rows.)"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.calls import SHUFFLE_TIMEOUT, call_with_timeout
from conformance.shuffle.tables import ROW_ID, ShuffleCase, mixed_case

DESTINATION = "_partitions"  # the name dask's lowering gives the column
NPARTITIONS = 5


def with_destinations(case: ShuffleCase, seed: int, bad: str | None = None) -> ShuffleCase:
    """``case`` with a destination column in ``[0, npartitions)``, skewed (output 3 gets
    none: an empty output must be one); with ``bad``, one row's destination is bad."""
    rng = np.random.default_rng(seed)
    out = []
    for i, t in enumerate(case.tables):
        dest = rng.choice(np.array([0, 1, 1, 2, 4, 4, 4]), t.num_rows).astype(np.int64)
        column = pa.array(dest.astype(np.float64) if bad == "fraction" else dest)  # one type
        if bad is not None and i == len(case.tables) - 1:
            column = _bad(dest, bad, case.npartitions)
        out.append(t.append_column(DESTINATION, column))
    return ShuffleCase(tuple(out), case.on, case.npartitions)


def _bad(dest: np.ndarray, kind: str, npartitions: int) -> pa.Array:
    """``dest`` with its last value made bad: out of range, negative, null or a fraction."""
    if kind == "fraction":
        values = dest.astype(np.float64)
        values[-1] = 1.5
        return pa.array(values)
    values = dest.copy()
    values[-1] = {"range": npartitions, "negative": -1, "null": 0}[kind]
    mask = np.zeros(len(values), bool)
    mask[-1] = kind == "null"
    return pa.array(values, mask=mask)


def destination_problems(case: ShuffleCase, outputs: list) -> list[str]:
    """Every row in the output its destination names, with its values (less the
    destination) unchanged, and none lost or twice."""
    if len(outputs) != case.npartitions:
        return [f"{len(outputs)} outputs for npartitions={case.npartitions}"]
    want = {
        rid: d
        for t in case.tables
        for rid, d in zip(
            t.column(ROW_ID).to_pylist(), t.column(DESTINATION).to_pylist(), strict=True
        )
    }
    inputs = [t.drop_columns([DESTINATION]) for t in case.tables]
    problems = oracle.row_problems(
        inputs, [o.drop_columns([c for c in o.column_names if c == DESTINATION]) for o in outputs]
    )
    wrong = sorted(
        (rid, want.get(rid), i)
        for i, o in enumerate(outputs)
        for rid in o.column(ROW_ID).to_pylist()
        if want.get(rid) != i
    )
    if wrong:
        rid, d, i = wrong[0]
        problems.append(
            f"{len(wrong)} rows in an output their destination does not name, e.g. row id {rid}: destination {d}, in output {i}"
        )
    return problems


def _shuffle_to(cluster, inputs, npartitions: int) -> list:
    env = cluster.env
    return call_with_timeout(
        lambda: cluster.adapter.shuffle_to(inputs, DESTINATION, npartitions, env), SHUFFLE_TIMEOUT
    )


@conformance_id("SHUF-DEST-001", clause=("14.26",))
@requires("shuffle", "shuffle.destinations")
def test_rows_go_to_the_output_their_destination_names(impl, shuffle_cluster, record_detail):
    """Destinations skewed, one output named by no row, inputs of different sizes. (Found by
    mutation: nothing in the suite reached the reference's shuffle by destinations.)"""
    nulls = "shuffle.nulls" in impl.capabilities
    for seed, (n_inputs, rows) in enumerate([(3, 40), (4, 7)]):
        case = with_destinations(
            mixed_case(30 + seed, n_inputs, rows, NPARTITIONS, nulls=nulls), seed
        )
        outputs = _shuffle_to(shuffle_cluster, shuffle_cluster.load(case.tables), case.npartitions)
        problems = destination_problems(case, outputs)
        assert not problems, "; ".join(problems)
    record_detail(f"{NPARTITIONS} outputs, every row where its destination says")


@conformance_id("SHUF-DEST-002", clause=("14.26", "14.12"))
@requires("shuffle", "shuffle.destinations")
@pytest.mark.parametrize("bad", ["range", "negative", "null", "fraction"])
def test_bad_destinations_are_refused_naming_the_column(impl, shuffle_cluster, bad):
    """One row's destination out of range (= npartitions), negative, null or 1.5: the
    shuffle raises naming the column and returns no outputs; the cluster shuffles by
    destinations correctly right after."""
    nulls = "shuffle.nulls" in impl.capabilities
    case = with_destinations(mixed_case(40, 3, 20, NPARTITIONS, nulls=nulls), 4, bad)
    inputs = shuffle_cluster.load(case.tables)
    with pytest.raises(Exception) as raised:
        outputs = _shuffle_to(shuffle_cluster, inputs, case.npartitions)
        where = {i: o.num_rows for i, o in enumerate(outputs)}
        pytest.fail(f"a {bad} destination was accepted: output sizes {where}")
    assert DESTINATION in str(raised.value), (
        f"the error does not name {DESTINATION!r}: {raised.value!r}"
    )
    del inputs
    good = with_destinations(mixed_case(41, 2, 15, NPARTITIONS, nulls=nulls), 5)
    outputs = _shuffle_to(shuffle_cluster, shuffle_cluster.load(good.tables), good.npartitions)
    problems = destination_problems(good, outputs)
    assert not problems, "the shuffle after the refusal: " + "; ".join(problems)
