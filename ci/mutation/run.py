"""Mutation testing of the reference, judged by the conformance suite only.

    python ci/mutation/run.py [--group store] [--module PATH] [--budget 3600] [--jobs 2]
                              [--limit N] [--seed 0] [--fresh] [--report docs/mutation.md]

Sessions live under ``.mutation/`` per commit: a run resumes the pending mutants of the same
commit, in the same seeded random order, so a budgeted run (cut short) is a uniform sample and
the next run goes on from it. ``--fresh`` starts over. A new commit starts a new session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import json
import platform
import shlex
import sys
from pathlib import Path

import covmap
import execute
import plan
import report
from select_tests import Baseline, run_baseline
from targets import GROUPS, Group, group_of

REPO = execute.REPO


def _machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def changed(module: str, old: str, new: str) -> bool:
    import subprocess

    return subprocess.run(["git", "diff", "--quiet", old, new, "--", module], cwd=REPO).returncode != 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group", action="append", choices=[g.name for g in GROUPS], help="default: all")
    p.add_argument("--module", action="append", help="one target module (repeatable)")
    p.add_argument("--budget", type=float, default=3600.0, help="seconds; no new mutant starts after it")
    p.add_argument("--jobs", type=int, default=2, help="parallel workers (one repo copy each)")
    p.add_argument("--limit", type=int, help="run at most this many mutants")
    p.add_argument("--seed", type=int, default=0, help="the sampling order")
    p.add_argument("--fresh", action="store_true", help="discard this commit's results and start over")
    p.add_argument("--dir", type=Path, default=REPO / ".mutation", help="sessions and repo copies")
    p.add_argument("--report", type=Path, help="write the score here (e.g. docs/mutation.md)")
    p.add_argument("--survivors", type=Path, help="write the untriaged survivors here")
    p.add_argument("--ids", help="judge with these conformance IDs instead of the group's slice (smoke runs)")
    p.add_argument(
        "--impl",
        help="judge through these adapters (comma-separated) instead of the group's, e.g. "
        "reference,reference-in-dask for code only the lazy path reaches; kept in sessions of their own",
    )
    p.add_argument("--triage", type=Path, default=REPO / "docs" / "mutation-triage.toml")
    p.add_argument("--commit", default="HEAD", help="the commit whose code is mutated and judged")
    p.add_argument("--carry-from", help="a commit whose kills carry over (same code, a suite that only grew)")
    p.add_argument("--rerun-timeouts", action="store_true", help="forget kills by timeout, run them again")
    p.add_argument("--timeout-factor", type=float, default=3.0, help="timeout = factor x baseline + 60 s")
    p.add_argument(
        "--test-procs", type=int, default=1,
        help="pytest-xdist processes per mutant's run (2: a survivor's tests in about half the time)",
    )  # fmt: skip
    p.add_argument("--only-unreached", action="store_true", help="run only mutants no in-process test reaches")
    p.add_argument(
        "--select",
        choices=("coverage", "slice"),
        default="coverage",
        help="coverage: each mutant by the tests that reach its statement in any process "
        "(a coverage map of the slice, cached per code and suite); slice: the former mode "
        "(the whole slice, or in-process coverage for the store); in sessions of their own",
    )
    p.add_argument("--report-only", action="store_true", help="score what has run; run nothing")
    args = p.parse_args(argv)

    head = execute.commit(args.commit)
    groups = [g for g in GROUPS if not args.group or g.name in args.group]
    if args.ids or args.impl:
        groups = [
            Group(
                f"{g.name}[{args.ids or g.ids}{f' @ {args.impl}' if args.impl else ''}]",
                g.modules, args.ids or g.ids, g.in_process, args.impl or g.impl,
            )  # fmt: skip
            for g in groups
        ]
    by_module = {m: g for g in groups for m in g.modules if not args.module or m in args.module}
    modules = list(by_module)
    if args.module and len(modules) != len(args.module):
        unknown = set(args.module) - set(modules)
        raise SystemExit(f"not a mutation target: {sorted(unknown)} (targets: see ci/mutation/targets.py)")
    root = args.dir / (head[:12] if not args.impl else f"{head[:12]}-{args.impl.replace(',', '+')}")
    if args.select == "coverage":
        root = root.with_name(root.name + "-cov")
    sessions = root / "sessions"
    workdirs = [root / f"work{i}" for i in range(max(1, args.jobs))]

    if not args.report_only:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / "lock", "w")  # noqa: SIM115 (held until the process exits)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another mutation run holds {root}: wait for it or use --dir") from None
        for w in workdirs:
            execute.extract(head, w)  # also undoes a mutant that a killed run left in place
        for module in modules:
            if args.fresh or not plan.session_path(sessions, module).exists():
                n = plan.init_session(module, workdirs[0], sessions)
                print(f"plan: {module}: {n} mutants", flush=True)
        if args.carry_from:
            old = root.with_name(root.name.replace(head[:12], execute.commit(args.carry_from)[:12]))
            old = old / "sessions"  # the same mode's sessions (a -cov run carries from -cov)
            same = [m for m in modules if not changed(m, args.carry_from, head)]
            n = execute.carry_kills(same, old, sessions)
            print(f"carried {n} kills from {args.carry_from} ({len(modules) - len(same)} modules changed)", flush=True)
        execute.TIMEOUT_FACTOR = args.timeout_factor
        execute.TEST_PROCS = args.test_procs
        if args.rerun_timeouts:
            existing = [m for m in modules if plan.session_path(sessions, m).exists()]
            print(f"forgot {execute.reset_timeouts(existing, sessions)} kills by timeout", flush=True)
        base_file = root / "baseline.json"
        base = Baseline.load(base_file) if base_file.exists() else Baseline()
        needed = list({g.name: g for g in by_module.values()}.values())
        run_baseline(
            base, needed, workdirs[0], execute.test_env(workdirs[0]), root,
            select=args.select, commit=head, cache=args.dir / "covmap",
        )  # fmt: skip
        base.save(base_file)
        from rich.progress import Progress

        with Progress() as progress:
            counts = execute.run(
                by_module, sessions, base, workdirs, budget_s=args.budget, seed=args.seed,
                limit=args.limit, only_unreached=args.only_unreached, progress=progress,
            )  # fmt: skip
        print(json.dumps(counts), flush=True)

    triage = report.load_triage(args.triage)
    stratum_of = None
    base_file = root / "baseline.json"
    if base_file.exists():
        base = Baseline.load(base_file)

        def stratum_of(module, spec):
            group = by_module.get(module) or group_of(module)  # sessions of other modules too
            # the map this root was judged with (a group's adapters may have changed since)
            keys = [k for k in base.reach if k == group.slice_key]
            keys = keys or [k for k in base.reach if k.rsplit(":", 1)[-1] == group.ids]
            if keys:
                src = workdirs[0] / module
                found = covmap.tests_for(base.reach[keys[0]], src, module, spec.start_pos[0], spec.end_pos[0])
                return "reached by no test (a survivor without running)" if found == [] else "reached by a test"
            if not group.in_process:
                return "runs in dask workers: judged by the whole slice"
            job = execute.Job(module, execute.WorkItem.single("", spec))
            reach = execute.reached_in_process(job, group, base)
            return "reached in-process" if reach else "reached only by subprocess tests"

    scores = [s for s in report.score(sessions, triage, stratum_of, seed=args.seed) if s.module in modules]
    command = "python ci/mutation/run.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = report.markdown(
        scores, commit=head, date=dt.date.today().isoformat(), command=command.strip(),
        machine=_machine(),
    )  # fmt: skip
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    if args.survivors:
        args.survivors.parent.mkdir(parents=True, exist_ok=True)
        args.survivors.write_text(report.survivors_markdown(scores) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
