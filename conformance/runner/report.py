"""The conformance report: per-ID x per-column statuses, as Markdown and JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import NOT_EXERCISED_PREFIX
from .links import for_reader

# Worst first: aggregate the items that share an ID and a column.
RANK = {
    "FAIL": 9,
    "XPASS": 8,
    "xfail": 7,
    "flaky": 6,
    "not exercised": 5,
    "pass": 4,
    "skip": 3,
    "N/A": 2,
}
NA_PREFIX = "N/A:"
XPASS_STRICT = "[XPASS(strict)]"
SPEC_FILE = Path(__file__).resolve().parent.parent / "SPEC.md"
# As the repository names it, and as the wheel does (relative to site-packages); the JSON
# keeps this form, the Markdown rewrites it for its reader (links.for_reader).
SPEC_LINK = "conformance/SPEC.md"
ENVIRONMENT_RERUN = "conformance_environment_rerun"  # runner/environment.py's property
# Cells that carry a note (reason and link) under the table: every cell but a pass.
NOTED = ("FAIL", "N/A", "XPASS", "xfail", "flaky", "not exercised", "skip")


def classify(report) -> str | None:
    """One pytest TestReport -> a cell status, or None when it adds nothing."""
    wasxfail = hasattr(report, "wasxfail")
    if report.failed:
        return "XPASS" if str(report.longrepr).startswith(XPASS_STRICT) else "FAIL"
    if report.skipped:
        if wasxfail:
            return "xfail"
        text = _skip_reason(report)
        if NOT_EXERCISED_PREFIX in text:
            return "not exercised"
        return "N/A" if NA_PREFIX in text else "skip"
    if report.when == "call":
        if wasxfail:
            return "XPASS"
        return "flaky" if _props(report).get("conformance_flaky") else "pass"
    return None


def _props(report) -> dict:
    return dict(getattr(report, "user_properties", ()) or ())


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def _failure_reason(report, limit: int = 600) -> str:
    """The crash message of a failed test (its phase when not the call), so the JSON report
    says why a cell failed even where the terminal output is lost."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    if report.when != "call":
        text = f"in {report.when}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clause_link(clause: str, base: str = SPEC_LINK) -> str:
    return f"{base}#c{clause}"


@dataclass
class Results:
    meta: dict = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    items: dict[str, dict] = field(default_factory=dict)  # nodeid -> record
    # SPEC.md section 15's cells: "operation|condition|when" -> times fired over the run
    cells_fired: dict[str, int] = field(default_factory=dict)

    def add(self, report, props: dict) -> None:
        if getattr(report, "when", None) == "teardown":  # every property by then, counted once
            for cell, n in (props.get("cells_fired") or {}).items():
                self.cells_fired[cell] = self.cells_fired.get(cell, 0) + int(n)
        status = classify(report)
        if status is None:
            return
        col = f"{props['conformance_impl']}@{props['conformance_device']}"
        manifest = props.get("conformance_manifest") or {}
        rec = self.items.setdefault(
            report.nodeid,
            {
                "id": props["conformance_id"],
                "nodeid": report.nodeid,
                "column": col,
                "impl": props["conformance_impl"],
                "device": props["conformance_device"],
                "clauses": list(props.get("conformance_clauses") or []),
                "status": status,
                "duration": 0.0,
                "reason": None,
                "link": None,
            },
        )
        rec["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
        if RANK[status] > RANK[rec["status"]]:
            rec["status"] = status
        if status == rec["status"]:
            if status in ("xfail", "XPASS", "flaky") or (status == "skip" and manifest):
                rec["reason"], rec["link"] = manifest.get("reason"), manifest.get("link")
            elif status == "not exercised":
                rec["reason"] = _skip_reason(report).split(NOT_EXERCISED_PREFIX, 1)[1].strip()
                rec["link"] = clause_link(rec["clauses"][0]) if rec["clauses"] else None
            elif status in ("skip", "N/A"):
                rec["reason"] = _skip_reason(report)
            elif status == "FAIL" and rec["reason"] is None:  # the first failure is the cause
                rec["reason"] = _failure_reason(report)
                if props.get("conformance_failed_clauses"):  # a machine's failing step
                    rec["failed_clauses"] = list(props["conformance_failed_clauses"])
            if status == "flaky":
                failed, runs = props["conformance_flaky"]
                rec["flaky_failed"], rec["flaky_runs"] = int(failed), int(runs)
        if props.get(ENVIRONMENT_RERUN):  # the first attempt failed on the machine
            rec["environment_rerun"] = " ".join(str(props[ENVIRONMENT_RERUN]).split())
        if props.get("conformance_detail") and status == rec["status"]:
            rec["detail"] = props["conformance_detail"]
        if col not in self.columns:
            self.columns.append(col)

    def _cells(self) -> dict[str, dict[str, dict]]:
        """ID -> column -> the worst record of that cell (flaky counts summed)."""
        cells: dict[str, dict[str, dict]] = {}
        for rec in sorted(self.items.values(), key=lambda r: r["nodeid"]):
            row = cells.setdefault(rec["id"], {})
            old = row.get(rec["column"])
            if old is not None and rec["status"] == old["status"] == "flaky":
                old = row[rec["column"]] = {
                    **old,
                    "flaky_failed": old["flaky_failed"] + rec["flaky_failed"],
                    "flaky_runs": old["flaky_runs"] + rec["flaky_runs"],
                }
            elif old is None or RANK[rec["status"]] > RANK[old["status"]]:
                row[rec["column"]] = rec
        return dict(sorted(cells.items()))

    @staticmethod
    def _text(rec: dict) -> str:
        if rec["status"] == "flaky":
            return f"flaky {rec['flaky_failed']}/{rec['flaky_runs']}"
        detail = rec.get("detail")
        return f"{rec['status']} ({detail})" if detail else rec["status"]

    def table(self) -> dict[str, dict[str, str]]:
        """ID -> column -> cell text (``pass``, ``FAIL``, ``flaky 2/3``, ...)."""
        return {
            cid: {col: self._text(rec) for col, rec in row.items()}
            for cid, row in self._cells().items()
        }

    def clauses(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rec in self.items.values():
            for c in rec["clauses"]:
                if c not in out.setdefault(rec["id"], []):
                    out[rec["id"]].append(c)
        return dict(sorted(out.items()))

    def header(self) -> list[str]:
        """What was run, where and when: the lines above the table."""
        m = self.meta
        impls = ", ".join(
            f"{i['name']} {i['version']} (`{i['spec']}`)" for i in m.get("implementations", [])
        )
        commit = m.get("commit") or "unknown"
        if m.get("commit") and m.get("dirty"):
            commit += " (with uncommitted changes)"
        return [
            f"- implementations: {impls or 'none'}",
            f"- device: {m.get('device', '?')}",
            f"- profile: {m.get('profile', '?')}",
            f"- date: {m.get('date', '?')}",
            f"- commit: {commit}",
            f"- suite {m.get('suite_version', '?')}, spec {m.get('spec_version', '?')}, "
            f"protocol {m.get('protocol_version', '?')}, python {m.get('python', '?')}",
        ]

    def markdown(self, base: str | Path | None = None, within: bool = False) -> str:
        """Header, table (a clause column linking into SPEC.md) and one note per noted cell.

        ``base``: the folder the reader is in; repository-relative links are rewritten to
        the files of this copy of the suite, checkout or installed (``links.for_reader``).
        """
        cols = list(self.columns)
        cells, clauses = self._cells(), self.clauses()
        notes: dict[tuple, int] = {}
        lines = [*self.header(), ""]
        lines += ["| ID | " + " | ".join(cols) + " | clauses |", "|---|" + "---|" * (len(cols) + 1)]
        for cid, row in cells.items():
            texts = []
            for c in cols:
                rec = row.get(c)
                if rec is None:
                    texts.append("")
                    continue
                text = self._text(rec)
                if rec.get("failed_clauses"):  # the markdown only: JSON cells stay "FAIL"
                    text += f" (clause {', '.join(rec['failed_clauses'])})"
                if rec["status"] in NOTED and (rec["reason"] or rec["link"]):
                    key = (rec["status"], rec["reason"], rec["link"])
                    text += f" [{notes.setdefault(key, len(notes) + 1)}]"
                if rec.get("environment_rerun"):  # never silently green
                    key = ("rerun", f"the first attempt failed on the environment, not the "
                           f"implementation: {rec['environment_rerun']}", None)  # fmt: skip
                    text += f" (rerun) [{notes.setdefault(key, len(notes) + 1)}]"
                texts.append(text)
            links = ", ".join(
                f"[{c}]({for_reader(clause_link(c), base, within)})" for c in clauses.get(cid, [])
            )
            lines.append(f"| {cid} | " + " | ".join(texts) + f" | {links} |")
        totals = []
        for c in cols:
            vals = [row[c]["status"] for row in cells.values() if c in row]
            counts = {s: vals.count(s) for s in RANK if vals.count(s)}
            totals.append(", ".join(f"{n} {s}" for s, n in counts.items()))
        lines.append("| **total** | " + " | ".join(totals) + " | |")
        if notes:
            lines += ["", "Notes:", ""]
            for (status, reason, link), n in notes.items():
                where = f" ({for_reader(link, base, within)})" if link else ""
                text = " ".join((reason or "").split())  # one line: a failure may span many
                text = text.removeprefix(NA_PREFIX).strip() if status == "N/A" else text
                lines.append(f"{n}. {status}: {text}{where}")
        if self.cells_fired:
            from ..conditions import fired_lines

            lines += ["", "Conditions fired (SPEC.md section 15's matrix; 0: produced by a rule "
                      "that never fired in this run):", "", *fired_lines(self.cells_fired)]  # fmt: skip
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            **self.meta,
            "columns": self.columns,
            "table": self.table(),
            "clauses": {
                cid: [{"clause": c, "link": clause_link(c)} for c in cs]
                for cid, cs in self.clauses().items()
            },
            "tests": sorted(self.items.values(), key=lambda r: (r["id"], r["nodeid"])),
            "cells_fired": dict(sorted(self.cells_fired.items())),
        }

    def write(self, directory: str | Path) -> list[Path]:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        j = d / "conformance.json"
        m = d / "conformance.md"
        j.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True))
        body = self.markdown(base=d.resolve())
        m.write_text("# Conformance report\n\n" + body + "\n")
        return [j, m]
