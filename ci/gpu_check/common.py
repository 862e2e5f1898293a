"""What the GPU check's steps share: units, the checkout, device sync, an earlier step's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MiB, GiB = 2**20, 2**30
RESULT = "GPU-CHECK-RESULT "  # a step's child prints its result on a line starting so


def sync(device: Any) -> None:
    """Wait for ``device``'s queued work (nothing to wait for on sim)."""
    if device.kind == "cuda":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def gbs(nbytes: float, seconds: float) -> float:
    return round(nbytes / seconds / 1e9, 2)


def previous(out: Path, step: str) -> dict:
    """An earlier step's data from this run's JSON (empty if it did not run)."""
    try:
        doc = json.loads((out / "gpu-check.json").read_text())
    except (OSError, ValueError):
        return {}
    for s in doc.get("steps", []):
        if s["name"] == step and s.get("status") == "pass":
            return s.get("data", {})
    return {}
