"""Clause 14.23: a row's pandas index label travels with it. Inputs as
``pa.Table.from_pandas`` writes a frame with an index; a dataframe front end holds those
columns as the frame's index, an Arrow-native shuffle as columns like any other."""

from __future__ import annotations

from hypothesis import strategies as st

from conformance import conformance_id, extras, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.harness import for_each_case
from conformance.shuffle.judge import metadata_problems
from conformance.shuffle.tables import INDEX_KINDS, mixed_case, shuffle_cases, with_index

_NAMES = ("label", None)  # a named index, and an unnamed one (``__index_level_0__``)


@st.composite
def _indexed_cases(draw, nulls: bool):
    case = draw(shuffle_cases(nulls=nulls, max_rows=60))
    return with_index(case, draw(st.sampled_from(INDEX_KINDS)), draw(st.sampled_from(_NAMES)))


@conformance_id("SHUF-INDEX-001", clause=("14.23", "14.1", "14.6", "14.8", "14.15"))
@requires("shuffle")
def test_a_rows_index_label_travels_with_it(impl, shuffle_cluster, hyp_settings):
    """Unique int labels, unique strings, labels two rows share and categorical labels (a
    pandas ``CategoricalIndex``, an Arrow dictionary), named and unnamed:
    every row keeps its label, every output keeps the index column and pandas' metadata.
    (Found by mutation: reference-in-dask not restoring the index, or dropping it where
    dask keeps it, passed every other clause; the suite's frames carried none.)"""
    extras.pandas()  # the index is pandas' (its metadata, a CategoricalIndex)
    nulls = "shuffle.nulls" in impl.capabilities

    def body(case):
        outputs = shuffle_cluster.run(case).outputs
        problems = oracle.check(case, outputs) or metadata_problems(outputs, case.schema)
        assert not problems, "; ".join(problems)

    examples = [
        with_index(mixed_case(23, 3, 12, 4, nulls=nulls), kind, name)
        for kind, name in (("int", "label"), ("repeated", None), ("str", None), ("category", "label"))
    ]
    for_each_case(hyp_settings(shuffle=True), _indexed_cases(nulls), body, examples)
