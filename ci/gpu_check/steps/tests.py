"""Step ``tests``: tests/device and tests/kernels on the real cuda device."""

from __future__ import annotations

from pathlib import Path

from ..pytest_run import pytest_step

NAME, TITLE, CAP, LEAST = "tests", "tests/device + tests/kernels on cuda", 110, 30
WHAT = "pytest tests/device tests/kernels on the real cuda device (PROXIFY_REQUIRE_GPU=1)"
NEEDS_GPU, DRY, DRY_SKIP = True, None, "needs a GPU (CI runs these tests on sim in ci/test.sh)"


def run(dry: bool, out: Path, timeout: float) -> dict:
    return pytest_step(["tests/device", "tests/kernels", "-m", "not cudasim and not slow",
                        "-n", "4", "-rfEs"], {"PROXIFY_REQUIRE_GPU": "1"}, timeout)
