"""ci/flake_hunt.sh and ci/flake_report.py: a flake hunt lists every test that ever failed,
its rate and its first failure, from junit files; tried on synthetic junit and on a small
real hunt whose one test fails every other run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "ci" / "flake_report.py"


def _junit(cases: str) -> str:
    return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>'


def _case(name: str, body: str = "", cls: str = "tests.meta.test_x") -> str:
    return f'<testcase classname="{cls}" name="{name}" time="0.1">{body}</testcase>'


def _report(tmp_path: Path, runs: list[str], *extra: str):
    files = []
    for i, text in enumerate(runs, 1):
        f = tmp_path / f"run-{i}.xml"
        f.write_text(_junit(text), encoding="utf-8")
        files.append(str(f))
    cmd = [sys.executable, str(REPORT), *files, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_a_test_failing_in_some_runs_is_listed_with_rate_and_first_failure(tmp_path):
    fail = '<failure message="assert (606, 132, 105) == (606, 134, 95)">trace one</failure>'
    later = '<failure message="assert 2 == 3">trace two</failure>'
    runs = [
        _case("test_ok") + _case("test_replay"),
        _case("test_ok") + _case("test_replay", fail),
        _case("test_ok") + _case("test_replay", later),
        _case("test_ok") + _case("test_replay") + _case("test_skipped", "<skipped/>"),
    ]
    proc = _report(tmp_path, runs)
    assert proc.returncode == 1, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if "FLAKY" in ln or "FAILS" in ln]
    assert lines == [
        "  FLAKY tests.meta.test_x::test_replay: failed 2/4; first in "
        f"{tmp_path.name}/run-2.xml: assert (606, 132, 105) == (606, 134, 95)"
    ], proc.stdout
    assert "test_ok" not in proc.stdout and "test_skipped" not in proc.stdout


def test_errors_always_failing_tests_and_unreadable_junit_are_listed(tmp_path):
    err = '<error message="fixture blew up">x</error>'
    proc = _report(tmp_path, [_case("test_e", err), _case("test_e", err)])
    assert "FAILS tests.meta.test_x::test_e: failed 2/2" in proc.stdout
    (tmp_path / "broken.xml").write_text("<testsuites><testsuite>", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(REPORT), str(tmp_path / "broken.xml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1 and "unreadable junit" in proc.stdout


def test_a_pass_only_on_a_rerun_is_a_flake(tmp_path):
    rerun = (
        '<properties><property name="passed_on_rerun" value="[\'SHUF-FAULT-003\']"/></properties>'
    )
    calm = '<properties><property name="conformance_flaky" value="[0, 3]"/></properties>'
    proc = _report(tmp_path, [_case("test_control", rerun) + _case("test_manifest", calm)])
    assert (
        "FLAKY tests.meta.test_x::test_control: failed 0/1, passed only on a rerun 1/1"
        in proc.stdout
    )
    assert "test_manifest" not in proc.stdout  # a manifest's flaky entry whose runs all passed
    assert proc.returncode == 1


def test_known_flakes_and_environment_failures_do_not_fail_the_hunt(tmp_path):
    nanny = '<failure message="the nanny never restarted worker tcp://127.0.0.1:1">x</failure>'
    hung = "<failure message=\"environment: distributed's wait_for_workers(2, timeout=60) did not\">x</failure>"
    flaky = '<failure message="boom">x</failure>'
    reran = '<properties><property name="conformance_environment_rerun" value="NannyNeverRestarted: x"/></properties>'
    runs = [
        _case("test_kill", nanny) + _case("test_known", flaky) + _case("test_reran", reran),
        _case("test_kill") + _case("test_known") + _case("test_reran", hung),
    ]
    known = tmp_path / "known.txt"
    known.write_text("# tracked in issue 99\ntests.meta.test_x::test_known\n", encoding="utf-8")
    proc = _report(tmp_path, runs, "--known", str(known))
    assert proc.returncode == 0, proc.stdout
    assert "ENVIRONMENT tests.meta.test_x::test_kill: failed 0/1, environment 1" in proc.stdout
    assert "FLAKY tests.meta.test_x::test_known: failed 1/2" in proc.stdout
    assert (  # the suite's own rerun after the machine failed (conformance/runner/environment.py)
        "ENVIRONMENT tests.meta.test_x::test_reran: failed 0/1, environment 2 (not counted); "
        "first in "
        in proc.stdout
        and "[environment, rerun] NannyNeverRestarted: x" in proc.stdout
    ), proc.stdout


def test_the_hunt_runs_tests_n_times_and_names_the_flaky_one(tmp_path):
    """A real hunt: a test that fails on every other run (a counter file) is listed 1/2
    with its message; the script's exit status says a new flake was found."""
    (tmp_path / "test_sometimes.py").write_text(
        "from pathlib import Path\n"
        "def test_sometimes():\n"
        "    f = Path(__file__).with_name('count')\n"
        "    n = int(f.read_text()) if f.exists() else 0\n"
        "    f.write_text(str(n + 1))\n"
        "    assert n % 2 == 0, f'odd run {n}'\n"
        "def test_always():\n"
        "    pass\n",
        encoding="utf-8",
    )
    out = tmp_path / "hunt"
    cmd = ["bash", str(REPO / "ci" / "flake_hunt.sh"), "--runs", "2", "--out", str(out),
           "--known", str(tmp_path / "none.txt"), "--", str(tmp_path), "-p", "no:cacheprovider",
           "-p", "no:randomly", "-n", "0", "--rootdir", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "test_sometimes::test_sometimes: failed 1/2" in proc.stdout, proc.stdout
    assert "odd run 1" in proc.stdout and "test_always" not in proc.stdout.split("run(s)")[1]


def test_the_hunt_refuses_bad_arguments():
    for args, why in (
        (["--runs", "0", "--", "x"], "--runs wants a positive number"),
        ([], "name the tests"),
    ):
        proc = subprocess.run(["bash", str(REPO / "ci" / "flake_hunt.sh"), *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO)  # fmt: skip
        assert proc.returncode == 2 and why in proc.stderr


def test_a_run_that_fails_outside_any_test_fails_the_hunt(tmp_path):
    """A run whose exit status is not 0 while its junit names no failing test (a crash,
    ruff, an interrupted session) is no clean run: the hunt says so and fails."""
    (tmp_path / "test_quits.py").write_text(
        "import pytest\ndef test_ok():\n    pass\ndef test_quit():\n    pytest.exit('bye', returncode=3)\n",
        encoding="utf-8",
    )
    cmd = ["bash", str(REPO / "ci" / "flake_hunt.sh"), "--runs", "1", "--out", str(tmp_path / "h"),
           "--known", str(tmp_path / "none.txt"), "--", str(tmp_path), "-p", "no:cacheprovider",
           "-p", "no:randomly", "-n", "0", "--rootdir", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "run 1/1 exit 3" in proc.stdout
    assert "run(s) 1 failed with no failing test in junit" in proc.stdout, proc.stdout
