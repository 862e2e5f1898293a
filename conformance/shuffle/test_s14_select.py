"""Clause 14.25: outputs selected before the shuffle is computed (a lazy front end's
``ddf.shuffle(...).partitions[which]``) are those outputs, not others of the same count."""

from __future__ import annotations

import pytest

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.calls import SHUFFLE_TIMEOUT, call_with_timeout
from conformance.shuffle.tables import mixed_case

WHICH = [4, 1]  # out of order, and not the first ones: a selection taken as a count fails


@conformance_id("SHUF-SELECT-001", clause=("14.25", "14.1"))
@requires("shuffle")
def test_selected_outputs_are_the_outputs_selected(impl, shuffle_cluster, record_detail):
    """Output ``which[j]`` of a shuffle computed alone equals output ``which[j]`` of the same
    shuffle computed whole: the same rows, with the same values. (Found by mutation: the
    lazy reference building outputs 0 and 1 for a selection of 4 and 1 passed every other
    clause, since the suite read every output.)"""
    shuffle_some = getattr(shuffle_cluster.adapter, "shuffle_some", None)
    if shuffle_some is None:
        pytest.skip("N/A: the adapter has no shuffle_some (no way to select outputs before computing)")
    nulls = "shuffle.nulls" in impl.capabilities
    case = mixed_case(25, n_inputs=4, rows_per_input=300, npartitions=6, nulls=nulls)
    inputs = shuffle_cluster.load(case.tables)
    whole = shuffle_cluster.shuffle(inputs, case.on, case.npartitions).outputs
    env = shuffle_cluster.env
    some = call_with_timeout(
        lambda: shuffle_some(inputs, list(case.on), case.npartitions, env, list(WHICH)), SHUFFLE_TIMEOUT
    )
    assert len(some) == len(WHICH), f"{len(some)} outputs for a selection of {len(WHICH)}"
    problems = [
        problem
        for j, i in enumerate(WHICH)
        for problem in oracle.same_rows_problems(some[j], whole[i], f"output {i} computed alone")
    ]
    assert not problems, "; ".join(problems)
    record_detail(f"outputs {WHICH} alone equal the whole shuffle's")
