"""summary.json and report.md in ``--out``, and the timeline picture."""

from __future__ import annotations

import json
import platform
import time
from collections import defaultdict
from importlib import metadata
from pathlib import Path
from typing import Any

from dask.utils import format_bytes

from . import timeline
from .record import RunRecord

PACKAGES = ("proxify-conformance", "dask", "distributed", "numpy", "pyarrow", "numba")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def _fmt(v: Any, key: str = "bytes") -> str:
    if isinstance(v, bool) or not isinstance(v, int) or "bytes" not in key and "limit" not in key and "bound" not in key:
        return str(v)
    return format_bytes(v)


def summary(record: RunRecord) -> dict[str, Any]:
    return {
        "scenario": record.scenario,
        "ok": record.ok,
        "interrupted": record.interrupted,
        "error": record.error,
        "violations": record.violations,
        "notes": record.notes,
        "settings": record.settings,
        "device": record.settings.get("device"),
        "seed": record.settings.get("seed"),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started)),
        "wall_seconds": round(record.now(), 2),
        "timings": {k: round(v, 3) for k, v in record.timings.items()},
        "figures": record.figures,
        "limits": record.limits,
        "implementations": record.impls,
        "faults": [o.__dict__ for o in record.outcomes],
        "worker_pids": sorted(record.worker_pids),
        "samples": len(record.samples),
        "versions": versions(),
        "machine": {"platform": platform.platform(), "cpus": _cpus()},
    }


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def faults_table(record: RunRecord) -> list[str]:
    """Cases as rows, implementations as columns: how each behaved under the same fault."""
    if not record.outcomes:
        return []
    impls = list(dict.fromkeys(o.impl for o in record.outcomes))
    cases = list(dict.fromkeys(o.case for o in record.outcomes))
    cell: dict[tuple[str, str], str] = defaultdict(str)
    for o in record.outcomes:
        text = f"**{o.status}**" + (f": {o.detail}" if o.detail else "")
        cell[o.case, o.impl] = text.replace("|", "\\|").replace("\n", " ")
    lines = ["| case | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
    for c in cases:
        lines.append(f"| {c} | " + " | ".join(cell[c, i] or "–" for i in impls) + " |")
    return lines


def markdown(record: RunRecord, picture: bool) -> str:
    s = summary(record)
    status = "PASS" if record.ok else ("INTERRUPTED (partial report)" if record.interrupted else "FAIL")
    out = [f"# stress {record.scenario}: {status}", ""]
    settings = record.settings
    out.append(
        f"Implementations {', '.join(settings.get('impls', []))}"
        + (f" (compared: {', '.join(settings['compare'])})" if settings.get("compare") else "")
        + f"; device `{settings.get('device')}`, {settings.get('workers')} workers, seed "
        f"{settings.get('seed')}; {s['started']}, {s['wall_seconds']} s."
    )
    out += ["", "## Violations", ""]
    out += [f"- {v}" for v in record.violations] or ["None."]
    if record.error:
        out += ["", f"Run error: `{record.error}`"]
    if record.figures:
        out += ["", "## Figures", "", "| figure | value |", "|---|---|"]
        out += [f"| {k} | {_fmt(v, k)} |" for k, v in record.figures.items()]
    if record.limits:
        out += ["", "Limits: " + ", ".join(f"{k} {_fmt(v)}" for k, v in record.limits.items() if v)]
    table = faults_table(record)
    if table:
        out += ["", "## Faults, side by side", "", *table, ""]
        out.append(
            "`correct`: right rows/values despite the fault; `error`: a clear error and nothing "
            "wrong returned; `violation`: wrong data, a hang, or leftovers; `not exercised`: the "
            "fault did not fire; `n/a`: the implementation does not declare the capability."
        )
    if record.timings:
        out += ["", "## Timings (s)", ""] + [f"- {k}: {v:.2f}" for k, v in record.timings.items()]
    if record.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in record.notes]
    if picture:
        out += ["", "## Timeline", "", "![timeline](timeline.png)"]
    out += ["", "## Versions", ""] + [f"- {k} {v}" for k, v in s["versions"].items()]
    return "\n".join(out) + "\n"


def write(record: RunRecord, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    picture = False
    try:
        picture = timeline.draw(record, out / "timeline.png")
    except Exception as exc:  # the report must still be written
        record.note(f"timeline not drawn: {type(exc).__name__}: {exc}")
    (out / "summary.json").write_text(json.dumps(summary(record), indent=2, default=str) + "\n")
    (out / "report.md").write_text(markdown(record, picture))
