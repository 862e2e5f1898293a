"""Helpers for the meta tests: run the conformance suite in a subprocess and read its report."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
META = Path(__file__).resolve().parent


def run_suite(args, tmp: Path, timeout: float = 900, env_extra: dict | None = None):
    """``pytest conformance <args>`` in a subprocess; returns (proc, report dict | None).

    ``timeout`` is a hang guard, not a speed check: at load 8 on 2 cores the zoo's control
    run took over 300 s and every zoo case errored.
    """
    report_dir = tmp / "report"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(META), str(REPO), env.get("PYTHONPATH", "")])
    env.pop("CONFORMANCE_PROFILE", None)
    env.update(env_extra or {})
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--conformance-report={report_dir}",
        *args,
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired as exc:
        # One stuck run fails the cases it held, saying so, rather than erroring every
        # case of the zoo that shares its fixture.
        proc = subprocess.CompletedProcess(
            cmd,
            returncode=-9,
            stdout=_text(exc.stdout) + f"\n[hang guard] killed after {timeout:.0f} s: {args}\n",
            stderr=_text(exc.stderr),
        )
    path = report_dir / "conformance.json"
    report = json.loads(path.read_text()) if path.exists() else None
    return proc, report


def _text(out: bytes | str | None) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


@pytest.fixture
def suite(tmp_path):
    return lambda args, **kw: run_suite(args, tmp_path, **kw)


def once_per_session(request, tmp_path_factory, name: str, produce) -> dict:
    """``produce()``, run by one process of the session: under xdist the first worker runs
    it and leaves the JSON result for the others (a module fixture runs once per worker)."""
    if not hasattr(request.config, "workerinput"):
        return produce()
    root = tmp_path_factory.getbasetemp().parent
    path = root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return json.loads(path.read_text())
        result = produce()
        path.write_text(json.dumps(result))
        return result
