"""Where a row lands depends on its key and ``npartitions`` alone: not on the run, the
order or cut of the inputs, or the number of workers; and two shuffles at once do not mix."""

from __future__ import annotations

import concurrent.futures

import pyarrow as pa
from hypothesis import strategies as st

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.harness import for_each_case
from conformance.shuffle.tables import ShuffleCase, mixed_case, shuffle_cases


def _nulls(impl) -> bool:
    return "shuffle.nulls" in impl.capabilities


def _recut(case: ShuffleCase, reverse: bool) -> ShuffleCase:
    """The same rows, the input partitions reversed and cut in two anew."""
    whole = pa.concat_tables(case.tables[::-1] if reverse else case.tables)
    half = whole.num_rows // 2
    return ShuffleCase((whole.slice(half), whole.slice(0, half)), case.on, case.npartitions)


@conformance_id("SHUF-DET-001", clause="14.9")
@requires("shuffle")
def test_assignment_is_repeatable_and_ignores_input_order(impl, shuffle_cluster, hyp_settings):
    def body(case):
        first = oracle.assignment(shuffle_cluster.run(case).outputs)
        again = oracle.assignment(shuffle_cluster.run(case).outputs)
        problems = oracle.assignment_problems(first, again, "in a repeated run")
        recut = oracle.assignment(shuffle_cluster.run(_recut(case, reverse=True)).outputs)
        problems += oracle.assignment_problems(first, recut, "with the inputs reordered and recut")
        assert not problems, "; ".join(problems)

    for_each_case(hyp_settings(shuffle=True), shuffle_cases(nulls=_nulls(impl)), body)


@conformance_id("SHUF-DET-002", clause="14.9")
@requires("shuffle")
def test_assignment_is_the_same_on_one_worker(impl, shuffle_cluster, make_shuffle_cluster):
    """One case of 600 rows over 12 outputs: on 2 workers, then on 1."""
    example = mixed_case(seed=3, n_inputs=4, rows_per_input=150, npartitions=12, nulls=_nulls(impl))
    two = oracle.assignment(shuffle_cluster.run(example).outputs)
    single = make_shuffle_cluster(n_workers=1)
    one = oracle.assignment(single.run(example).outputs)
    problems = oracle.assignment_problems(one, two, "on 2 workers than on 1")
    assert not problems, "; ".join(problems)


@conformance_id("SHUF-CONC-001", clause="14.10")
@requires("shuffle")
def test_two_shuffles_at_once_do_not_mix(impl, shuffle_cluster, hyp_settings):
    """Each of two shuffles run at once keeps every row and gives the assignment it gives
    alone: cross-talk, not the key hashing (SHUF-KEYS-001's business), is what is judged."""

    def body(pair):
        alone = [oracle.assignment(shuffle_cluster.run(c).outputs) for c in pair]
        loaded = [shuffle_cluster.load(c.tables) for c in pair]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(shuffle_cluster.shuffle, inputs, c.on, c.npartitions)
                for inputs, c in zip(loaded, pair, strict=True)
            ]
            outputs = [r.result().outputs for r in runs]
        for name, case, out, solo in zip("ab", pair, outputs, alone, strict=True):
            problems = oracle.count_problems(out, case.npartitions)
            problems = problems or oracle.row_problems(case.tables, out)
            problems += oracle.assignment_problems(solo, oracle.assignment(out), "than alone")
            assert not problems, f"shuffle {name}: " + "; ".join(problems)

    cases = shuffle_cases(nulls=_nulls(impl))
    for_each_case(hyp_settings(shuffle=True), st.tuples(cases, cases), body)
