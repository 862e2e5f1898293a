"""Every row arrives, once, unchanged, in the right place: generated inputs of mixed key
types with nulls, NaN, -0.0, extremes and strings, uneven and empty input partitions,
skew, and ``npartitions`` above and below the row count."""

from __future__ import annotations

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.harness import for_each_case
from conformance.shuffle.tables import (
    bool_keys_with_nulls_in_one_input,
    float_keys_signed_zero_and_nan,
    narrow_case,
    shuffle_cases,
)

LARGE_ROWS = 100_000  # past 2**16: an input, and the largest output, cross every threshold there


def _run(impl, shuffle_cluster, hyp_settings, check, *, nulls=None, examples=(), **kw):
    nulls = "shuffle.nulls" in impl.capabilities if nulls is None else nulls

    def body(case):
        outputs = shuffle_cluster.run(case).outputs
        problems = oracle.count_problems(outputs, case.npartitions)
        assert not problems, problems
        problems = check(case, outputs)
        assert not problems, "; ".join(problems)

    strategy = shuffle_cases(nulls=nulls, **kw)
    for_each_case(hyp_settings(shuffle=True), strategy, body, examples)


@conformance_id("SHUF-ROWS-001", clause="14.1")
@requires("shuffle")
def test_every_row_arrives_once_and_unchanged(impl, shuffle_cluster, hyp_settings):
    _run(impl, shuffle_cluster, hyp_settings, lambda c, out: oracle.row_problems(c.tables, out))


@conformance_id("SHUF-ROWS-002", clause="14.1")
@requires("shuffle")
def test_inputs_and_outputs_past_64k_rows_arrive_whole(impl, shuffle_cluster, record_detail):
    """Two inputs of 100,000 rows (an int32 key, a string payload, 17 bytes a row: 1.7 MB an
    input, one piece even for an implementation that cuts inputs into chunks of a few MiB)
    into two outputs: an input and an output each cross 2**16 rows, where a parallel kernel
    or a second read batch starts. One case, no hypothesis: the size is the point."""
    case = narrow_case(11, 2, LARGE_ROWS, 2, nulls="shuffle.nulls" in impl.capabilities)
    outputs = shuffle_cluster.run(case).outputs
    problems = oracle.count_problems(outputs, 2) or oracle.row_problems(case.tables, outputs)
    assert not problems, "; ".join(problems[:6])
    largest = max(t.num_rows for t in outputs)
    assert largest > 2**16, f"no output crossed 2**16 rows ({largest:,}): the case proves less"
    record_detail(f"inputs of {LARGE_ROWS:,} rows, largest output {largest:,}")


@conformance_id("SHUF-KEYS-001", clause="14.6")
@requires("shuffle")
def test_equal_keys_land_in_one_output(impl, shuffle_cluster, hyp_settings):
    """NaN with NaN, -0.0 with 0.0, equal strings of one column type; always, too, equal bool
    keys in two inputs of which only one holds nulls (with ``shuffle.nulls``)."""
    examples = [float_keys_signed_zero_and_nan()]
    if "shuffle.nulls" in impl.capabilities:
        examples.append(bool_keys_with_nulls_in_one_input())
    _run(
        impl,
        shuffle_cluster,
        hyp_settings,
        lambda c, out: oracle.colocation_problems(out, c.on),
        examples=examples,
    )


@conformance_id("SHUF-NULL-001", clause="14.4")
@requires("shuffle", "shuffle.nulls")
def test_null_keys_are_shuffled_together(impl, shuffle_cluster, hyp_settings):
    def check(case, outputs):
        return oracle.row_problems(case.tables, outputs) + oracle.colocation_problems(
            outputs, case.on
        )

    _run(impl, shuffle_cluster, hyp_settings, check, nulls=True)


@conformance_id("SHUF-COUNT-001", clause="14.7")
@requires("shuffle")
def test_exactly_npartitions_outputs_in_order(impl, shuffle_cluster, hyp_settings):
    """Empty outputs included: ``npartitions`` is often above the row count."""

    def check(case, outputs):
        return oracle.count_problems(outputs, case.npartitions)

    _run(impl, shuffle_cluster, hyp_settings, check, max_rows=20)


@conformance_id("SHUF-SCHEMA-001", clause="14.8")
@requires("shuffle")
def test_outputs_keep_the_input_schema(impl, shuffle_cluster, hyp_settings):
    """Names, order and types: an int column with nulls stays an int column, an empty
    output has the schema too."""
    _run(impl, shuffle_cluster, hyp_settings, lambda c, out: oracle.schema_problems(out, c.schema))
