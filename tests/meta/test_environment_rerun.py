"""A judged test that fails because the machine did (conformance.EnvironmentFailure, e.g. a
nanny that never restarted its worker) runs once more, and the report and the junit file say
so (conformance/runner/environment.py); any other failure is never rerun."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from conftest import run_suite

ENV_TEST = """
import itertools
from conformance import EnvironmentFailure, conformance_id, requires

ONCE, TWICE, PLAIN = itertools.count(), itertools.count(), itertools.count()

class NannyGone(EnvironmentFailure):
    pass

@conformance_id("ENV-ONE-001", clause="14.19")
@requires("store")
def test_machine_fails_once(impl, tmp_path):
    if next(ONCE) == 0:
        try:
            raise TimeoutError("wait_for_workers")
        except TimeoutError as exc:  # wrapped, as hypothesis and the machines wrap it
            raise AssertionError("a step failed") from NannyGone("nanny never restarted w1")

@conformance_id("ENV-ONE-002", clause="14.19")
@requires("store")
def test_machine_fails_always(impl):
    next(TWICE)
    raise ExceptionGroup("steps", [NannyGone("nanny never restarted w2")])

@conformance_id("ENV-ONE-003", clause="14.19")
@requires("store")
def test_implementation_fails(impl):
    assert next(PLAIN) > 0, "the implementation's own failure: never rerun"

def test_counts():
    assert (next(ONCE), next(TWICE), next(PLAIN)) == (2, 2, 1)
"""


@pytest.mark.parametrize("xdist", [False, True])
def test_an_environment_failure_is_rerun_once_and_named(tmp_path, xdist):
    t = tmp_path / "test_env.py"
    t.write_text(ENV_TEST)
    junit = tmp_path / "junit.xml"
    args = [str(t), "--impl=reference", "-p", "no:randomly", f"--junitxml={junit}"]
    proc, report = run_suite(args + (["-n", "1"] if xdist else []), tmp_path)
    assert report is not None, proc.stdout[-3000:]
    assert report["table"] == {
        "ENV-ONE-001": {"reference@sim": "pass"},
        "ENV-ONE-002": {"reference@sim": "FAIL"},
        "ENV-ONE-003": {"reference@sim": "FAIL"},
    }, proc.stdout[-3000:]
    assert "2 failed, 2 passed" in proc.stdout.splitlines()[-1], proc.stdout[-500:]
    recs = {r["id"]: r for r in report["tests"]}
    assert "NannyGone: nanny never restarted w1" in recs["ENV-ONE-001"]["environment_rerun"]
    assert "environment_rerun" not in recs["ENV-ONE-003"], "an implementation's failure was rerun"
    assert "| ENV-ONE-001 | pass (rerun) [1] |" in proc.stdout, proc.stdout[-3000:]
    assert "1. rerun: the first attempt failed on the environment, not the implementation: " \
        "NannyGone: nanny never restarted w1" in proc.stdout  # fmt: skip
    cases = {c.get("name").split("[")[0]: c for c in ET.parse(junit).getroot().iter("testcase")}
    props = {
        p.get("name"): p.get("value") for p in cases["test_machine_fails_once"].iter("property")
    }
    assert "nanny never restarted w1" in props["conformance_environment_rerun"]
    assert cases["test_counts"].find("failure") is None, "a test ran more or less than it should"
