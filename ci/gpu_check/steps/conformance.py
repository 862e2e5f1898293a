"""Step ``conformance``: the suite against the reference on the cuda device, ci profile."""

from __future__ import annotations

from pathlib import Path

from ..pytest_run import conformance_plugin_args, pytest_step

NAME, TITLE, CAP, LEAST = "conformance", "conformance --device=cuda (ci)", 150, 40
WHAT = "pytest conformance --impl=reference --device=cuda, ci profile"
NEEDS_GPU, DRY = True, None
DRY_SKIP = "needs a GPU (CI runs the suite on sim in ci/test.sh)"


def run(dry: bool, out: Path, timeout: float) -> dict:
    res = pytest_step(["conformance", *conformance_plugin_args(), "--impl=reference",
                       "--device=cuda", f"--conformance-report={out / 'conformance'}",
                       "-n", "4"],
                      {"CONFORMANCE_PROFILE": "ci", "HYPOTHESIS_PROFILE": "ci"}, timeout)
    report = out / "conformance" / "conformance.json"
    if report.exists():
        res["data"] = {"report": str(report.relative_to(out))}
    return res
