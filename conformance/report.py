"""The conformance report: per-ID x per-column statuses, as Markdown and JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# Worst first: aggregate the items that share an ID and a column.
RANK = {"FAIL": 6, "XPASS": 5, "xfail": 4, "pass": 3, "skip": 2, "N/A": 1}
NA_PREFIX = "N/A:"


def classify(report) -> str | None:
    """One pytest TestReport -> a cell status, or None when it adds nothing."""
    wasxfail = hasattr(report, "wasxfail")
    if report.failed:
        return "FAIL"
    if report.skipped:
        if wasxfail:
            return "xfail"
        return "N/A" if NA_PREFIX in str(report.longrepr) else "skip"
    if report.when == "call":
        return "XPASS" if wasxfail else "pass"
    return None


@dataclass
class Results:
    meta: dict = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    items: dict[str, dict] = field(default_factory=dict)  # nodeid -> record

    def add(self, report, props: dict) -> None:
        status = classify(report)
        if status is None:
            return
        col = f"{props['conformance_impl']}@{props['conformance_device']}"
        rec = self.items.setdefault(
            report.nodeid,
            {
                "id": props["conformance_id"],
                "nodeid": report.nodeid,
                "column": col,
                "impl": props["conformance_impl"],
                "device": props["conformance_device"],
                "status": status,
                "duration": 0.0,
                "reason": None,
            },
        )
        rec["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
        if RANK[status] > RANK[rec["status"]]:
            rec["status"] = status
        if status in ("xfail", "XPASS"):
            rec["reason"] = str(getattr(report, "wasxfail", "")) or rec["reason"]
        elif status in ("skip", "N/A"):
            longrepr = report.longrepr
            rec["reason"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if col not in self.columns:
            self.columns.append(col)

    def table(self) -> dict[str, dict[str, str]]:
        cells: dict[str, dict[str, str]] = {}
        for rec in self.items.values():
            row = cells.setdefault(rec["id"], {})
            old = row.get(rec["column"])
            if old is None or RANK[rec["status"]] > RANK[old]:
                row[rec["column"]] = rec["status"]
        return dict(sorted(cells.items()))

    def markdown(self) -> str:
        cols = list(self.columns)
        lines = ["| ID | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for cid, row in self.table().items():
            lines.append(f"| {cid} | " + " | ".join(row.get(c, "") for c in cols) + " |")
        totals = []
        for c in cols:
            vals = [row.get(c) for row in self.table().values() if row.get(c)]
            counts = {s: vals.count(s) for s in RANK if vals.count(s)}
            totals.append(", ".join(f"{n} {s}" for s, n in counts.items()))
        lines.append("| **total** | " + " | ".join(totals) + " |")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            **self.meta,
            "columns": self.columns,
            "table": self.table(),
            "tests": sorted(self.items.values(), key=lambda r: (r["id"], r["nodeid"])),
        }

    def write(self, directory: str | Path) -> list[Path]:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        j = d / "conformance.json"
        m = d / "conformance.md"
        j.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True))
        m.write_text("# Conformance report\n\n" + self.markdown() + "\n")
        return [j, m]
