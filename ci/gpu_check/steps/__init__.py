"""The GPU check's steps, in the order they run: one module each.

Each module declares ``NAME``, ``TITLE``, ``CAP`` (its timeout cap, s), ``LEAST`` (the least
time worth starting it, s), ``WHAT`` (what it does on a GPU), ``NEEDS_GPU``, and for the dry
run (CI, no GPU) either ``DRY`` (what it does instead) or ``DRY_SKIP`` (why it is skipped);
and ``run(dry, out, timeout) -> result``.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from . import bandwidth, conformance, device, partition, shuffle, store, tests, twins

MODULES = [device, bandwidth, tests, twins, partition, store, conformance, shuffle]
BY_NAME = {m.NAME: m for m in MODULES}

# name, title, cap (s), least time worth starting it (s), what it does on a GPU
STEPS = [(m.NAME, m.TITLE, m.CAP, m.LEAST, m.WHAT) for m in MODULES]
NEEDS_GPU = {m.NAME for m in MODULES if m.NEEDS_GPU}
# what --dry-run does instead (in CI), and why the GPU work is skipped
DRY = {m.NAME: m.DRY for m in MODULES if m.DRY}
DRY_SKIP = {m.NAME: m.DRY_SKIP for m in MODULES if m.DRY_SKIP}


def dry_env(name: str) -> dict[str, str]:
    """Environment variables a step's child needs in the dry run."""
    return dict(getattr(BY_NAME[name], "ENV_DRY", {}))


def run_step(name: str, dry: bool, out: Path, timeout: float) -> dict:
    try:
        return BY_NAME[name].run(dry, out, timeout)
    except Exception as exc:  # noqa: BLE001 - a step's error is its result
        traceback.print_exc()
        return {"status": "error", "summary": f"{type(exc).__name__}: {str(exc)[:300]}"}
