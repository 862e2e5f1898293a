"""Judge survivors of a narrow run again, with their group's whole slice.

    python ci/mutation/rejudge.py --sessions .mutation/<run>/sessions --sig SIG [--sig SIG ...]
        [--ids 'SHUF-*'] [--impl reference,reference-in-dask]

A smoke run (``run.py --ids``) judges each mutant with a few IDs, so its survivors may be
killed by IDs it left out. Each named survivor is applied to a clean worktree of HEAD (its
diff, by context: the lines may have moved) and judged with ``--ids`` (default: the group's
slice) through ``--impl`` (default: the group's adapters). One line per mutant: KILLED with
the first failing tests, SURVIVED, or NOT APPLIED when the code it mutates has changed. A
killed one is triaged ``rejudged`` in ``docs/mutation-triage.toml`` with the failing test; a
survivor is a real one, to triage as usual.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import report
from targets import group_of

REPO = Path(__file__).resolve().parents[2]


def survivors(sessions: Path, sigs: set[str]) -> Iterator[tuple[str, str, str]]:
    """(signature, module, diff) of each named survivor in the run's sessions."""
    for db in sorted(sessions.glob("*.sqlite")):
        with sqlite3.connect(db) as con:
            rows = con.execute(
                "select s.module_path, s.operator_name, s.definition_name, r.diff "
                "from mutation_specs s join work_results r using(job_id) where r.test_outcome = 'SURVIVED'"
            ).fetchall()
        for path, operator, definition, diff in rows:
            module = re.sub(r"^.*?/work\d+/", "", path)  # the run's copy -> the repository path
            sig = report.signature(module, operator, definition, diff)
            if sig in sigs:
                yield sig, module, diff


def as_patch(module: str, diff: str) -> str:
    """cosmic-ray's diff, with its headers naming the repository path."""
    out = []
    for line in diff.splitlines():
        if line.startswith("--- mutation diff"):
            continue
        if line.startswith("--- "):
            line = f"--- a/{module}"
        elif line.startswith("+++ "):
            line = f"+++ b/{module}"
        out.append(line)
    return "\n".join(out) + "\n"


def judge(tree: Path, ids: str, impls: list[str], timeout: float) -> tuple[bool, list[str]]:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-p", "no:cacheprovider", "-q", "-x", "-n", "2",
           *(f"--impl={i}" for i in impls), f"--conformance-ids={ids}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=timeout)
    failed = [line.split(" - ")[0] for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    return proc.returncode != 0, failed[:2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=Path, required=True, help="the run's sessions folder")
    p.add_argument("--sig", action="append", required=True, help="a survivor's signature (repeatable)")
    p.add_argument("--ids", help="conformance IDs (default: the module's group slice)")
    p.add_argument("--impl", help="adapters, comma-separated (default: the group's)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per mutant")
    args = p.parse_args(argv)
    found = list(survivors(args.sessions, set(args.sig)))
    missing = set(args.sig) - {sig for sig, _, _ in found}
    if missing:
        raise SystemExit(f"rejudge: no survivor {', '.join(sorted(missing))} in {args.sessions}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True)
        try:
            for sig, module, diff in found:
                subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--", "."], check=True)
                patch = subprocess.run(["patch", "-p1", "-s", "-F3", "-d", str(tree)], input=as_patch(module, diff),
                                       text=True, capture_output=True)  # fmt: skip
                if patch.returncode != 0:
                    print(f"{sig} {module}: NOT APPLIED ({(patch.stdout + patch.stderr).strip()[:120]})", flush=True)
                    continue
                group = group_of(module)
                ids = args.ids or group.ids
                impls = (args.impl or group.impl).split(",")
                start = time.monotonic()
                killed, failed = judge(tree, ids, impls, args.timeout)
                verdict = "KILLED" if killed else "SURVIVED"
                print(f"{sig} {module}: {verdict} in {time.monotonic() - start:.0f} s {' '.join(failed)}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
