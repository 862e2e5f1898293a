"""The shuffle oracle itself: each problem it must report, on hand-made outputs."""

from __future__ import annotations

import pyarrow as pa

from conformance import shuffle_oracle as oracle
from conformance.tables import ROW_ID

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
