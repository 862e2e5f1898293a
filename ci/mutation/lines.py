"""Judge every mutant of a few lines with the tests meant to guard them: a review's check.

    python ci/mutation/lines.py --module reference_impl/shuffle/coordinator.py --lines 581-599 \\
        [--lines 302-303] --tests "tests/shuffle/test_in_dask.py::test_x" \\
        [--tests "conformance --impl=reference-in-dask --conformance-ids=SHUF-RERUN-002"]

A sampled run (``run.py``) judges a module's mutants in a seeded random order, so a function
of ten lines added to a module of 268 mutants is rarely reached in the time a review has. This
takes every mutant (the same operators as ``run.py``) whose mutated code starts inside the
given lines of HEAD's file, applies it to a clean worktree of HEAD (commit first: uncommitted
changes are not in it, and it says so) and runs ``python -m pytest <tests>`` there for each
``--tests``, in order, until one fails: one line per mutant, KILLED or SURVIVED. It is not a
score (the tests are chosen by hand, not the group's slice): a survivor here is judged with
the slice (``rejudge.py``) or triaged.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cosmic_ray.plugins
from cosmic_ray.mutating import mutate_code
from cosmic_ray.work_item import MutationSpec
from plan import mutants

REPO = Path(__file__).resolve().parents[2]


def _span(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def select(module: str, spans: list[tuple[int, int]], root: Path = REPO) -> list[MutationSpec]:
    """Every mutant of ``module`` (under ``root``) whose mutated code starts on a line of
    ``spans``."""
    specs = (item.mutations[0] for item in mutants(module, root))
    return [s for s in specs if any(a <= s.start_pos[0] <= b for a, b in spans)]


def mutant_source(source: str, spec: MutationSpec) -> str | None:
    """``source`` with ``spec``'s mutation applied (None if it applies nowhere)."""
    operator = cosmic_ray.plugins.get_operator(spec.operator_name)()
    return mutate_code(source, operator, spec.occurrence)


def _judge(tree: Path, runs: list[str], timeout: float) -> tuple[bool, list[str]]:
    """Whether a run failed, and its first failing tests."""
    for run in runs:
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", *shlex.split(run)]
        try:
            proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return True, [f"timeout after {timeout:.0f} s: {run}"]
        if proc.returncode != 0:
            lines = proc.stdout.splitlines()
            return True, [s.split(" - ")[0] for s in lines if s.startswith(("FAILED", "ERROR"))] or lines[-1:]
    return False, []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--module", required=True, help="a path relative to the repository")
    p.add_argument("--lines", type=_span, action="append", required=True, help="FIRST-LAST (repeatable)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    p.add_argument("--tests", action="append", required=True, help="pytest arguments, one run (repeatable)")
    args = p.parse_args(argv)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.split("\n")  # fmt: skip
    if any(dirty):
        print(f"lines.py: judging HEAD; these uncommitted changes are not in it: "
              f"{', '.join(d[3:] for d in dirty if d)}", file=sys.stderr, flush=True)  # fmt: skip
    killed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True)
        try:
            source = (tree / args.module).read_text()
            items = select(args.module, args.lines, tree)
            if not items:
                raise SystemExit(f"lines.py: no mutant starts in {args.lines} of {args.module}")
            for n, spec in enumerate(items, 1):
                mutated = mutant_source(source, spec)
                if mutated is None:
                    print(f"{n}/{len(items)} {spec.operator_name} #{spec.occurrence}: not applied", flush=True)
                    continue
                (tree / args.module).write_text(mutated)
                line = spec.start_pos[0]
                start = time.monotonic()
                dead, failed = _judge(tree, args.tests, args.timeout)
                killed += dead
                text = source.splitlines()[line - 1].strip()
                print(f"{n}/{len(items)} line {line} {spec.operator_name} #{spec.occurrence}: "
                      f"{'KILLED' if dead else 'SURVIVED'} in {time.monotonic() - start:.0f} s"
                      f" {' '.join(failed[:2])}\n    {text}", flush=True)  # fmt: skip
                (tree / args.module).write_text(source)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"{killed} of {len(items)} killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
