"""SPEC.md section 15's operations x conditions matrix and ``conformance/conditions.py``
agree, every cell is produced by a rule that exists or untested with a reason, and a rule
that fires a cell no rule is said to produce is an error."""

from __future__ import annotations

import inspect
import re

import pytest
from test_spec import SPEC, suite_citations

from conformance import conditions
from conformance.store import machines, world


def _spec_block() -> str:
    text = SPEC.read_text(encoding="utf-8")
    found = re.search(r"<!-- matrix:begin -->\n(.*?)\n<!-- matrix:end -->", text, re.S)
    assert found, "SPEC.md has no matrix block"
    return found.group(1)


def test_spec_matrix_is_the_codes():
    assert _spec_block() == conditions.render(), (
        "SPEC.md's matrix differs from conformance.conditions.render(): paste render()'s output"
    )


def test_every_cell_is_produced_or_has_a_reason():
    for op in conditions.STORE_OPERATIONS:
        for c in conditions.STORE_CONDITIONS:
            for when in conditions.WHEN:
                if (op, c, when) not in conditions.PRODUCED:
                    assert conditions.untested_reason(op, c, when) in conditions.UNTESTED
    for phase in conditions.SHUFFLE_PHASES:
        for c in conditions.CLUSTER_CONDITIONS:
            for when in conditions.WHEN:
                if (phase, c, when) not in conditions.SHUFFLE_PRODUCED:
                    assert conditions.shuffle_untested_reason(phase, c, when) in conditions.SHUFFLE_UNTESTED
    cells = {k for k in conditions.PRODUCED} | {k for k in conditions.SHUFFLE_PRODUCED}
    for _op, c, when in cells:
        assert when in conditions.WHEN
        assert c in conditions.STORE_CONDITIONS + conditions.CLUSTER_CONDITIONS


def test_every_producer_exists():
    rules = {name for name, _ in inspect.getmembers(world.WorldRules, inspect.isfunction)}
    rules |= {name for name, _ in inspect.getmembers(machines.StoreMachine, inspect.isfunction)}
    for rule in set(conditions.PRODUCED.values()):
        assert rule.split("(")[0].split(" ")[0] in rules, rule
    cited = suite_citations()
    for cid in set(conditions.SHUFFLE_PRODUCED.values()):
        assert cid in cited, cid


def test_each_condition_of_section_15_is_a_column():
    text = SPEC.read_text(encoding="utf-8")
    listed = set(re.findall(r"^- \*\*([A-Z]\d)\*\* ", text.split("## 15.")[1], re.M))
    assert set(conditions.STORE_CONDITIONS) <= listed | set(conditions.CLUSTER_CONDITIONS)


def test_firing_a_cell_no_rule_produces_is_an_error():
    with pytest.raises(KeyError, match="not produced"):
        conditions.fire("close_store", "T1", "during")
    with conditions.recording() as outer:
        with conditions.recording() as inner:
            conditions.fire("get", "D4", "during")
        conditions.fire("get", "D4", "during")
    conditions.fire("get", "D4", "during")  # no recording open: counted nowhere
    assert (dict(outer), dict(inner)) == ({"get|D4|during": 2}, {"get|D4|during": 1})


def test_the_report_prints_each_produced_cell_with_its_count():
    from types import SimpleNamespace

    from conformance.runner.report import Results

    results = Results()
    props = {
        "conformance_id": "STORE-STATE-003",
        "conformance_impl": "x",
        "conformance_device": "sim",
        "cells_fired": {"get|D4|during": 2},
    }
    for when in ("setup", "call", "teardown"):  # the properties ride on every phase's report
        report = SimpleNamespace(
            nodeid="t", when=when, outcome="passed", passed=True, failed=False, skipped=False,
            duration=0.0, longrepr=None, user_properties=list(props.items()), keywords={},
        )  # fmt: skip
        results.add(report, props)
    assert results.cells_fired == {"get|D4|during": 2}, "counted once per test"
    text = results.markdown()
    assert "| get, D4, during | `device_full_read` | 2 |" in text
    assert "| get, D2, during | `values_misbehave(alloc)` | 0 |" in text
    assert "| transfer, W1, during | `SHUF-FAULT-001` | 0 |" in text
