"""The GPU check's results on disk: ``gpu-check.json`` and ``gpu-results.md``, after every step."""

from __future__ import annotations

import json
from pathlib import Path


def table(steps: list[dict]) -> list[str]:
    lines = ["| step | status | result | s |", "|---|---|---|---|"]
    for s in steps:
        summary = str(s.get("summary", "")).replace("|", "/").replace("\n", " ")
        lines.append(f"| {s['name']} | {s['status']} | {summary} | {s.get('seconds', '')} |")
    return lines


def write(out: Path, doc: dict) -> None:
    (out / "gpu-check.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    dev = next((s for s in doc["steps"] if s["name"] == "device"), {})
    lines = [f"# GPU check{' (dry run: no GPU work)' if doc['dry_run'] else ''}", "",
             f"- date: {doc['started']}", f"- commit: {doc['commit']}",
             f"- device: {dev.get('summary', 'not recorded')}",
             f"- command: `{doc['command']}`",
             f"- budget: {doc['budget_s']} s; took {doc.get('seconds', '(running)')} s", "",
             *table(doc["steps"]), ""]
    for s in doc["steps"]:
        if s.get("table"):
            head, *rows = s["table"]
            lines += [f"## {s['name']}: {s['title']}", "",
                      "| " + " | ".join(map(str, head)) + " |",
                      "|" + "---|" * len(head),
                      *["| " + " | ".join(map(str, r)) + " |" for r in rows], ""]
    if any(s["status"] == "skipped" for s in doc["steps"]):
        lines += ["## Skipped", ""] + [f"- {s['name']}: {s['summary']}" for s in doc["steps"]
                                       if s["status"] == "skipped"] + [""]
    (out / "gpu-results.md").write_text("\n".join(lines))
