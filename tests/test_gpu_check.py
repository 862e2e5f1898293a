"""ci/gpu_check.sh's argument checks and the ci.gpu_check package's helpers (the dry run itself
runs in ci/test.sh; the GPU steps need a GPU)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ci.gpu_check import pytest_run, report, steps
from ci.gpu_check.common import previous

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args, message", [
    (["--frobnicate"], "unknown argument '--frobnicate'"),
    (["--budget", "5"], "--budget must be whole seconds >= 30"),
    (["--budget", "ten"], "--budget must be whole seconds >= 30"),
    (["--out"], "--out needs a folder"),
    (["--wheels"], "--wheels needs a folder"),
])
def test_bad_arguments_exit_2_before_any_work(tmp_path, args, message):
    proc = subprocess.run(["bash", str(REPO / "ci" / "gpu_check.sh"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "gpu_check: python" not in proc.stdout  # stopped before choosing a Python


def test_wheels_check_lists_what_is_missing(tmp_path):
    (tmp_path / "dask-2026.8.0-py3-none-any.whl").write_bytes(b"")
    proc = subprocess.run(["bash", str(REPO / "ci" / "gpu_wheels.sh"), "--check", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "dask==" not in proc.stdout and "distributed==2026.8.0" in proc.stdout
    assert "rmm-cu13==" in proc.stdout


def test_every_step_has_a_dry_run_plan():
    names = [s[0] for s in steps.STEPS]
    assert names == ["device", "bandwidth", "tests", "twins", "partition", "store",
                     "conformance", "shuffle"]
    for name in steps.NEEDS_GPU:
        assert (name in steps.DRY) != (name in steps.DRY_SKIP), name  # exercised or skipped, not both


def test_conformance_plugin_is_named_only_without_its_entry_point(monkeypatch):
    class EP:
        def __init__(self, value):
            self.value = value

    monkeypatch.setattr(pytest_run.md, "entry_points", lambda group: [EP("conformance.runner.plugin")])
    assert pytest_run.conformance_plugin_args() == []
    monkeypatch.setattr(pytest_run.md, "entry_points", lambda group: [EP("xdist.plugin")])
    assert pytest_run.conformance_plugin_args() == ["-p", "conformance.runner.plugin"]


def test_results_are_written_after_each_step_and_a_cut_run_keeps_them(tmp_path):
    doc = {"started": "2026-01-01 00:00 UTC", "commit": "abc", "dry_run": False,
           "budget_s": 420, "command": "bash ci/gpu_check.sh", "steps": [
               {"name": "device", "title": "device", "status": "pass", "summary": "H200 | x"},
               {"name": "bandwidth", "title": "copies", "status": "timeout",
                "summary": "ran past 60 s", "table": [("a", "b"), (1, 2)]}]}
    report.write(tmp_path, doc)
    md = (tmp_path / "gpu-results.md").read_text()
    assert "- device: H200 | x" in md and "| device | pass | H200 / x |" in md
    assert "| bandwidth | timeout | ran past 60 s |" in md
    assert "| a | b |" in md and "| 1 | 2 |" in md
    assert json.loads((tmp_path / "gpu-check.json").read_text())["steps"][1]["status"] == "timeout"
    assert previous(tmp_path, "device") == {} and previous(tmp_path, "bandwidth") == {}


def test_pytest_summary_line():
    text = "....\n===== 3 failed, 40 passed, 2 skipped in 12.3s =====\n"
    assert pytest_run.pytest_summary(text) == "3 failed, 40 passed, 2 skipped in 12.3s"
