"""Both selection modes on the same mutants: the coverage map must not change a verdict.

    python ci/mutation/compare_modes.py --root .mutation/<commit>-cov --job JOB_ID ... [--out FILE]

Each named mutant (a job id of the run's sessions) is applied to a fresh copy of the run's
commit and judged twice: by the tests its statement reaches (``--select coverage``) and by its
group's whole slice. A mutant the map says no test reaches runs the whole slice only; the
map's verdict for it is "survived". Prints one line per mutant and exits 1 on a disagreement.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import execute
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec
from select_tests import Baseline
from targets import group_of


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, required=True, help="the coverage-mode run's folder")
    p.add_argument("--job", action="append", required=True, help="a mutant's job id (repeatable)")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, help="append the lines here too")
    p.add_argument("--timeout-factor", type=float, default=5.0)
    args = p.parse_args(argv)

    execute.TIMEOUT_FACTOR = args.timeout_factor
    base = Baseline.load(args.root / "baseline.json")
    work = args.root / "compare"
    execute.extract(execute.commit(args.commit), work)
    items = {}
    for db_path in (args.root / "sessions").glob("*.sqlite"):
        module = db_path.stem.replace("__", "/") + ".py"
        with use_db(str(db_path), WorkDB.Mode.open) as db:
            for item in db.work_items:
                if item.job_id in args.job:
                    items[item.job_id] = (module, item)
    disagree = 0
    for job_id in args.job:
        module, item = items[job_id]
        group = group_of(module)
        spec = item.mutations[0]
        here = MutationSpec(
            module_path=work / module, operator_name=spec.operator_name, occurrence=spec.occurrence,
            start_pos=spec.start_pos, end_pos=spec.end_pos, operator_args=spec.operator_args,
            definition_name=spec.definition_name,
        )  # fmt: skip
        job = execute.Job(module, item)
        cov_cmd, cov_timeout = execute.command_for(job, group, base, work)
        n_cov = len(base.tests_for(group, module, spec.start_pos[0], spec.end_pos[0], work / module))
        whole = sorted(base.slices[group.slice_key], key=lambda t: base.durations.get(t, 0.0))
        launcher = [sys.executable, str(Path(execute.__file__).with_name("in_dir.py")), str(work)]
        slice_cmd = shlex.join(
            [*launcher, sys.executable, *group.pytest_args(), "-x", "-q", "--no-header", "-p", "no:cov", *whole]
        )
        slice_timeout = execute.TIMEOUT_FACTOR * sum(base.durations.get(t, 1.0) for t in whole) + 60
        verdicts = {}
        for mode, command, timeout, n in (
            ("coverage", cov_cmd, cov_timeout, n_cov),
            ("slice", slice_cmd, slice_timeout, len(whole)),
        ):
            start = time.monotonic()
            result = mutate_and_test([here], command, timeout)
            verdicts[mode] = ("killed" if result.is_killed else "survived", time.monotonic() - start, n)
        same = verdicts["coverage"][0] == verdicts["slice"][0]
        disagree += not same
        line = (
            f"{job_id} {module}:{spec.start_pos[0]} {spec.operator_name.split('/')[-1]}: "
            + ", ".join(f"{m} {v} ({n} tests, {s:.0f} s)" for m, (v, s, n) in verdicts.items())
            + ("" if same else "  DISAGREE")
        )
        print(line, flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(line + "\n")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
