"""Small runs of every scenario; each test is a real ``python -m stress`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def stress(*args: str, timeout: float = 400, path: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``python -m stress ARGS`` from the repository; ``path``: more PYTHONPATH entries."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *path]))
    return subprocess.run([sys.executable, "-m", "stress", *args, "--no-progress"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env=env)


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture
def run_stress():
    return stress
