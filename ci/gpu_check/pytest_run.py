"""pytest as a step (the ``tests`` and ``conformance`` steps): command line, run, summary line."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys

from .common import REPO


def conformance_plugin_args() -> list[str]:
    """``-p conformance.runner.plugin`` where the project is not installed (an air-gapped box runs it
    from the checkout on PYTHONPATH: no entry point); nothing where the entry point exists."""
    eps = md.entry_points(group="pytest11")
    return [] if any(ep.value == "conformance.runner.plugin" for ep in eps) else ["-p", "conformance.runner.plugin"]


def pytest_summary(text: str) -> str:
    lines = [ln.strip("= ") for ln in text.splitlines() if " in " in ln and (
        "passed" in ln or "failed" in ln or "error" in ln or "skipped" in ln)]
    return lines[-1] if lines else "no pytest summary line"


def pytest_step(args: list[str], env_extra: dict, timeout: float) -> dict:
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    print("$ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-3000:]
        print(tail.decode() if isinstance(tail, bytes) else tail, flush=True)
        return {"status": "timeout", "summary": f"pytest ran past {timeout:.0f} s"}
    print(proc.stdout[-6000:] + proc.stderr[-3000:], flush=True)
    summary = pytest_summary(proc.stdout + proc.stderr)
    return {"status": "pass" if proc.returncode == 0 else "fail",
            "summary": f"exit {proc.returncode}: {summary}"}
