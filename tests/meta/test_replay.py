"""A failing state machine prints a standalone program that fails the same way (issue 43).

The in-house store's ``state_bug`` (``len()`` forgets keys on disk) fails STORE-STATE-001; the
program its failure prints, imports included, is saved to a file in an empty folder and run
with ``python``: it must raise the same error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import META, REPO, run_suite


def _failure_lines(out: str) -> list[str]:
    """pytest's failure text without its frame: ``E       `` for one failure, ``    | ``
    inside an ExceptionGroup's sub-failures."""
    lines = []
    for ln in out.splitlines():
        if ln.startswith("E"):
            lines.append(ln.removeprefix("E").removeprefix("       "))
        elif re.match(r"^\s+\| ?", ln):
            lines.append(re.sub(r"^\s+\| ?", "", ln))
    return lines


def test_printed_program_replays_the_failure(tmp_path):
    proc, _report = run_suite(
        ["conformance", "--impl=inhouse_store:state_bug", "--conformance-ids=STORE-STATE-001",
         "-n", "0"],
        tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    text = "\n".join(_failure_lines(out))
    # The program printed after this failure's error (hypothesis may report other distinct
    # failures of the same store, each with a program of its own).
    start = text.index("from conformance.replay import *", text.index("keys()/len() disagree"))
    code = text[start : text.index("state.teardown()", start) + len("state.teardown()")]
    error = re.search(r"InvariantError: (keys\(\)/len\(\) disagree[^\n]*)", out)
    assert error, out[-3000:]
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "replay.py").write_text(code + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(META), str(REPO)]))
    run = subprocess.run([sys.executable, "replay.py"], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "InvariantError: keys()/len() disagree" in run.stderr, run.stderr[-3000:]
