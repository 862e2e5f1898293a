"""Clause 14.22: the types users hold beyond 14.1's generated set (dictionaries, decimals,
dates, times, halffloat) shuffle exactly, as keys and as payload: every row once and
unchanged, the inputs' Arrow types, equal keys in one output. The types an implementation
may not carry (lists, structs, maps, ordered dictionaries) are shuffled exactly or refused
naming the column, as payload and as the key."""

from __future__ import annotations

import pyarrow as pa

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.hard_types import HARD_COLUMN, HARD_TYPES, hard_key_case, hard_type_case
from conformance.shuffle.harness import for_each_case
from conformance.shuffle.nested_tables import dynamic_fields_case, nested_cases, null_leaves_case
from conformance.shuffle.tables import (
    DTYPE_TYPES,
    KEY_TYPES,
    every_dtype_case,
    mixed_case,
    shuffle_cases,
)

# generated: 14.22 keys and payload, or 14.1 keys mixed in; always: every type at once
_DTYPES = tuple(DTYPE_TYPES)


@conformance_id("SHUF-DTYPE-001", clause=("14.22", "14.1", "14.6", "14.8"))
@requires("shuffle", "shuffle.dtypes")
def test_dictionary_decimal_date_time_and_halffloat_columns_shuffle_exactly(
    impl, shuffle_cluster, hyp_settings
):
    nulls = "shuffle.nulls" in impl.capabilities

    def body(case):
        outputs = shuffle_cluster.run(case).outputs
        problems = oracle.count_problems(outputs, case.npartitions)
        assert not problems, problems
        problems = (
            oracle.schema_problems(outputs, case.schema)
            + oracle.row_problems(case.tables, outputs)
            + oracle.colocation_problems(outputs, case.on)
        )
        assert not problems, "; ".join(problems)

    keys = shuffle_cases(key_types=_DTYPES, payload_types=_DTYPES, nulls=nulls, max_rows=80)
    mixed = shuffle_cases(
        key_types=(*_DTYPES, *KEY_TYPES), payload_types=_DTYPES, nulls=nulls, max_rows=80
    )
    for_each_case(hyp_settings(shuffle=True), keys | mixed, body, [every_dtype_case()])


def _refusal_problems(exc: BaseException, what: str, impl, shuffle_cluster) -> list[str]:
    """A refusal must name the column, and the cluster must shuffle correctly after it."""
    problems = [] if HARD_COLUMN in str(exc) else [f"{what}: refused without naming the column: {exc!r}"]
    good = mixed_case(2, 2, 20, 3, nulls="shuffle.nulls" in impl.capabilities)
    after = oracle.check(good, shuffle_cluster.run(good).outputs)
    return problems + [f"after refusing {what}: {p}" for p in after]


@conformance_id("SHUF-DTYPE-002", clause=("14.22", "14.12"))
@requires("shuffle", "shuffle.dtypes")
def test_a_type_not_carried_is_refused_naming_the_column(impl, shuffle_cluster):
    """Lists, structs and ordered dictionaries: each shuffled exactly, or refused with the
    column named; never another type, rounded values or an error that leaves the user
    guessing which column. The cluster shuffles after a refusal. Every type is tried and
    every problem reported (one test, so that a manifest entry covers the clause)."""
    problems = []
    carries_nested = "shuffle.nested" in impl.capabilities
    for type_name in sorted(HARD_TYPES):
        case = hard_type_case(type_name)
        try:
            outputs = shuffle_cluster.run(case).outputs
        except Exception as exc:  # noqa: BLE001 - any refusal is allowed, if it names the column
            if carries_nested and pa.types.is_nested(HARD_TYPES[type_name][0]):
                problems.append(f"{type_name}: refused under shuffle.nested: {exc!r}")
            problems += _refusal_problems(exc, type_name, impl, shuffle_cluster)
            continue
        wrong = oracle.schema_problems(outputs, case.schema) + oracle.row_problems(case.tables, outputs)
        problems += [f"{type_name}: {p}" for p in wrong]
    assert not problems, "; ".join(problems)


@conformance_id("SHUF-DTYPE-003", clause=("14.22", "14.1", "14.8"))
@requires("shuffle", "shuffle.dtypes")
def test_drawn_nested_columns_are_shuffled_exactly_or_refused_naming_the_column(
    impl, shuffle_cluster, hyp_settings
):
    """14.22 over drawn types, not listed ones: a tree of lists, large and fixed-size lists,
    structs and maps, nulls at every level, null-typed leaves, in sliced and chunked inputs
    (always: ``null_leaves_case``, ``dynamic_fields_case``). Each case is
    shuffled exactly (every row once, every value and the type unchanged) or refused with
    the column named; with ``shuffle.nested``, exactly."""

    carries_nested = "shuffle.nested" in impl.capabilities

    def body(case):
        try:
            outputs = shuffle_cluster.run(case).outputs
        except Exception as exc:  # noqa: BLE001 - any refusal is allowed, if it names the column
            if carries_nested:
                raise AssertionError(f"refused under shuffle.nested: {exc!r}") from exc
            assert HARD_COLUMN in str(exc), f"refused without naming the column: {exc!r}"
            return
        problems = oracle.count_problems(outputs, case.npartitions)
        assert not problems, problems
        problems = oracle.schema_problems(outputs, case.schema) + oracle.row_problems(
            case.tables, outputs
        )
        assert not problems, "; ".join(problems)

    examples = [null_leaves_case(), dynamic_fields_case()]
    for_each_case(hyp_settings(shuffle=True), nested_cases(), body, examples)


@conformance_id("SHUF-DTYPE-004", clause=("14.22", "14.6", "14.12"))
@requires("shuffle", "shuffle.dtypes")
def test_a_key_of_a_type_not_carried_is_shuffled_or_refused_naming_the_column(
    impl, shuffle_cluster
):
    """Each of SHUF-DTYPE-002's types as the key (``on``), every value in both inputs: equal
    values (lists item by item, structs field by field, maps entry by entry) land in one
    output with every row once, or the shuffle is refused naming the column, and the cluster
    shuffles after. A front end that computes destinations with pandas' hashing cannot hash
    a list and must say which column it could not hash, not "unhashable type" from inside a
    task (found by mutation: the lazy path's check of its keys could go unseen)."""
    problems = []
    for type_name in sorted(HARD_TYPES):
        case = hard_key_case(type_name)
        try:
            outputs = shuffle_cluster.run(case).outputs
        except Exception as exc:  # noqa: BLE001 - any refusal is allowed, if it names the column
            problems += _refusal_problems(exc, f"{type_name} key", impl, shuffle_cluster)
            continue
        wrong = (
            oracle.count_problems(outputs, case.npartitions)
            + oracle.schema_problems(outputs, case.schema)
            + oracle.row_problems(case.tables, outputs)
            + oracle.colocation_problems(outputs, case.on)
        )
        problems += [f"{type_name} key: {p}" for p in wrong]
    assert not problems, "; ".join(problems)
