"""The shuffle oracle itself: each problem it must report, on hand-made outputs."""

from __future__ import annotations

import pyarrow as pa

from conformance.shuffle import oracle as oracle
from conformance.shuffle.tables import ROW_ID

INPUT = pa.table({"k": [1.0, -0.0, float("nan"), None], ROW_ID: [0, 1, 2, 3]})


def test_a_correct_shuffle_has_no_problems():
    outputs = [INPUT.slice(0, 2), INPUT.slice(2)]
    assert oracle.row_problems([INPUT], outputs) == []
    assert oracle.colocation_problems(outputs, ["k"]) == []


def test_a_row_twice_in_one_output_is_reported():
    """A duplicated row has its key, so a correct hash puts both copies in one output."""
    twice = pa.concat_tables([INPUT, INPUT.slice(1, 1)])
    assert oracle.row_problems([INPUT], [twice]) == ["1 rows output twice: row ids 1"]


def test_a_row_in_two_outputs_is_reported():
    problems = oracle.row_problems([INPUT], [INPUT, INPUT.slice(3)])
    assert problems == ["1 rows output twice: row ids 3"]


def test_lost_and_changed_rows_are_reported():
    changed = INPUT.slice(0, 3).set_column(0, "k", pa.array([1.0, 0.0, float("nan")]))
    problems = oracle.row_problems([INPUT], [changed])
    assert problems[0].startswith("1 of 4 rows lost: row ids 3")
    assert problems[1].startswith("1 rows changed, e.g. row id 1: k: ")


def test_equal_keys_in_two_outputs_are_reported():
    zero = pa.table({"k": [0.0], ROW_ID: [9]})
    problems = oracle.colocation_problems([INPUT, zero], ["k"])
    assert problems and problems[0].startswith("1 keys split across outputs")


def test_nested_values_compare_by_their_floats_bits_at_any_depth():
    """[NaN] is the same value as [NaN] (Python's list equality says not), [-0.0] is not
    [0.0], and a struct or map inside a list is compared field by field."""
    type_ = pa.list_(pa.struct([("f", pa.float64()), ("m", pa.map_(pa.string(), pa.float64()))]))

    def table(f: float, m: float) -> pa.Table:
        value = [{"f": f, "m": [("a", m)]}]
        return pa.table({"v": pa.array([value], type_), ROW_ID: pa.array([0], pa.int64())})

    nan = float("nan")
    assert oracle.row_problems([table(nan, nan)], [table(nan, nan)]) == []
    assert oracle.row_problems([table(-0.0, 1.0)], [table(0.0, 1.0)]) != []
    assert oracle.row_problems([table(1.0, -0.0)], [table(1.0, 0.0)]) != []
