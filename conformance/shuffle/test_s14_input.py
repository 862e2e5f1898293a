"""Bad arguments raise before any data moves, say what is wrong, and lose nothing: the same
inputs shuffle correctly right after."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.tables import ShuffleCase, mixed_case


def _case(impl) -> ShuffleCase:
    return mixed_case(5, 3, 40, 4, nulls="shuffle.nulls" in impl.capabilities)


def _rejects(cluster, case, on, npartitions, error, match, inputs=None) -> None:
    """The call raises ``error`` matching ``match``; then the same inputs shuffle correctly."""
    inputs = cluster.load(case.tables) if inputs is None else inputs
    with pytest.raises(error, match=match):
        cluster.shuffle(inputs, on, npartitions)
    good = cluster.shuffle(inputs, case.on, case.npartitions)
    problems = oracle.check(case, good.outputs)
    assert not problems, "after the rejected call: " + "; ".join(problems)


@conformance_id("SHUF-INPUT-001", clause="14.12")
@requires("shuffle", "shuffle.checks")
def test_unknown_key_column_is_named(impl, shuffle_cluster):
    _rejects(shuffle_cluster, _case(impl), ["k0", "no_such_column"], 4, Exception, "no_such_column")


@conformance_id("SHUF-INPUT-002", clause="14.12")
@requires("shuffle", "shuffle.checks")
@pytest.mark.parametrize("npartitions", [0, -3, 2.5])
def test_bad_npartitions_is_named(impl, shuffle_cluster, npartitions):
    case = _case(impl)
    _rejects(shuffle_cluster, case, case.on, npartitions, (ValueError, TypeError), "npartitions")


@conformance_id("SHUF-INPUT-003", clause="14.12")
@requires("shuffle", "shuffle.checks")
def test_empty_on_is_rejected(impl, shuffle_cluster):
    _rejects(shuffle_cluster, _case(impl), [], 4, (ValueError, TypeError), r"\bon\b|key")


@conformance_id("SHUF-INPUT-004", clause="14.12")
@requires("shuffle", "shuffle.checks")
def test_inputs_with_differing_schemas_are_named(impl, shuffle_cluster):
    """One input has column ``p0`` as int64 instead of string."""
    case = _case(impl)
    first = case.tables[0]
    bad = first.set_column(
        first.schema.get_field_index("p0"), "p0", pa.array(range(first.num_rows), pa.int64())
    )
    mixed = ShuffleCase((bad, *case.tables[1:]), case.on, case.npartitions)
    inputs = shuffle_cluster.load(mixed.tables)
    with pytest.raises(Exception, match="p0"):
        shuffle_cluster.shuffle(inputs, case.on, case.npartitions)
    del inputs
    # the well-formed inputs, loaded anew, still shuffle
    good = shuffle_cluster.run(case)
    assert not oracle.check(case, good.outputs)
