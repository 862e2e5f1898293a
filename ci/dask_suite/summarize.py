"""Summarize a routed run of dask's shuffle tests against its baseline, and judge it.

``python -m ci.dask_suite.summarize ROUTED.jsonl BASELINE.jsonl OUT.md`` writes a
Markdown report: per test file, how many tests passed, how many of those reached the
device shuffle, and every test that failed or was not run, with its reason. A failure is
*known* when ``known.txt`` (``<nodeid glob> | <reason>``) explains it. The exit status is
1 when a test that passes on the baseline fails routed without a known reason, or a known
failure now passes (so the list stays true), else 0.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections import Counter
from pathlib import Path

KNOWN = Path(__file__).with_name("known.txt")
NOT_RUN = ("skipped", "xfailed")


def _load(path: Path) -> dict[str, dict]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["test"]] = record
    return out


def _known() -> list[tuple[str, str]]:
    rules = []
    for line in KNOWN.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, _, reason = line.partition("|")
            rules.append((pattern.strip(), reason.strip()))
    return rules


def _reason(test: str, rules: list[tuple[str, str]]) -> str | None:
    return next((reason for pattern, reason in rules if fnmatch.fnmatchcase(test, pattern)), None)


def hangs(test: str) -> str | None:
    """``known.txt``'s reason when it says ``test`` hangs routed (the plugin skips it)."""
    reason = _reason(test, _known())
    return reason if reason is not None and reason.startswith("hangs") else None


def _file_of(test: str) -> str:
    return test.split("::", 1)[0].rsplit("site-packages/", 1)[-1]


def summarize(routed: dict[str, dict], baseline: dict[str, dict]) -> tuple[str, list[str]]:
    rules = _known()
    problems: list[str] = []
    by_file: dict[str, Counter] = {}
    failing: list[tuple[str, str, str, str]] = []
    for test, record in routed.items():
        counts = by_file.setdefault(_file_of(test), Counter())
        before = baseline.get(test, {}).get("outcome", "not in baseline")
        outcome = record["outcome"]
        counts["tests"] += 1
        counts[outcome if outcome in ("passed", *NOT_RUN) else "failed"] += 1
        counts["baseline passed"] += before == "passed"
        if outcome == "passed":
            counts["reached"] += record["reached"] > 0
        known = _reason(test, rules)
        if outcome not in ("passed", *NOT_RUN) or (outcome in NOT_RUN and before == "passed"):
            failing.append((test, outcome, before, known or record["error"]))
            if before == "passed" and known is None:
                problems.append(f"{test}: {outcome} routed, passed on the baseline: {record['error']}")
        elif outcome == "passed" and known is not None and before == "passed":
            problems.append(f"{test}: passes now, but known.txt says it fails ({known}); drop the line")
    lines = [
        "| file | tests | passed | passed, reached the device shuffle | failed | skipped / xfailed | baseline passed |",
        "|---|---|---|---|---|---|---|",
    ]
    total: Counter = Counter()
    for name, c in sorted(by_file.items()):
        total.update(c)
        lines.append(_row(name, c))
    lines.append(_row("**all**", total))
    lines += ["", "| test | routed | baseline | why |", "|---|---|---|---|"]
    for test, outcome, before, why in sorted(failing):
        lines.append(f"| `{test.rsplit('/', 1)[-1]}` | {outcome} | {before} | {why.replace('|', '/')} |")
    return "\n".join(lines) + "\n", problems


def _row(name: str, c: Counter) -> str:
    not_run = c["skipped"] + c["xfailed"]
    return f"| {name} | {c['tests']} | {c['passed']} | {c['reached']} | {c['failed']} | {not_run} | {c['baseline passed']} |"


def main(argv: list[str]) -> int:
    routed, baseline, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    table, problems = summarize(_load(routed), _load(baseline))
    out.write_text(table)
    print(table)
    for problem in problems:
        print(f"UNEXPLAINED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
