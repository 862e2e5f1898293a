"""Run pending mutants in parallel copies of the repository, within a time budget.

Each worker owns a copy of the committed tree (``git archive HEAD``), so a mutant written
into one copy is never seen by a test running in another. Mutants run in a seeded random
order across every module: a run cut short by its budget is a uniform sample, and the next
run resumes the same order.
"""

from __future__ import annotations

import io
import os
import queue
import shlex
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import attrs
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome, WorkItem
from plan import is_timeout, rank, session_path
from select_tests import Baseline
from targets import Group

from conformance.runner import gitinfo

REPO = Path(__file__).resolve().parents[2]


def commit(rev: str = "HEAD") -> str:
    """The full hash ``rev`` names (conformance.runner.gitinfo, the project's one lookup)."""
    sha = gitinfo.commit(rev, cwd=REPO)
    if sha is None:
        raise SystemExit(f"ci/mutation: {rev!r} names no commit of {REPO}")
    return sha


def extract(rev: str, dest: Path) -> None:
    """(Re)write ``dest`` with the tree of ``rev``, undoing any mutant a killed run left."""
    dest.mkdir(parents=True, exist_ok=True)
    blob = subprocess.check_output(["git", "archive", rev], cwd=REPO)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")


def test_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(workdir), CONFORMANCE_PROFILE="ci", HYPOTHESIS_PROFILE="ci")
    env.pop("COVERAGE_PROCESS_START", None)
    return env


@dataclass
class Job:
    module: str
    item: WorkItem


def pending(modules: list[str], sessions: Path, seed: int) -> list[Job]:
    jobs = []
    for module in modules:
        with use_db(str(session_path(sessions, module)), WorkDB.Mode.open) as db:
            jobs += [Job(module, item) for item in db.pending_work_items]
    return sorted(jobs, key=lambda j: rank(j.item.job_id, seed))


def reached_in_process(job: Job, group: Group, base: Baseline) -> bool:
    """Whether line coverage of the pytest process saw the mutated lines (the in-process
    stratum of the score; the rest is judged by subprocess tests only)."""
    spec = job.item.mutations[0]
    lines = base.lines.get(job.module, {})
    return not group.in_process or any(lines.get(n) for n in range(spec.start_pos[0], spec.end_pos[0] + 1))


def reset_timeouts(modules: list[str], sessions: Path) -> int:
    """Forget the kills by timeout (a loaded machine makes them) so that they run again."""
    import sqlite3

    n = 0
    for module in modules:
        with sqlite3.connect(session_path(sessions, module)) as db:
            n += db.execute(
                "DELETE FROM work_results WHERE output = 'timeout' OR output LIKE 'timeout:%'"
            ).rowcount
    return n


def carry_kills(modules: list[str], old: Path, new: Path) -> int:
    """Copy into ``new`` the kills recorded in ``old`` for the same mutants (same module,
    operator and position: the module's code must be unchanged). Sound when the suite only
    grew between the two commits: a test that killed a mutant still kills it."""
    n = 0
    for module in modules:
        src, dst = session_path(old, module), session_path(new, module)
        if not src.exists() or not dst.exists():
            continue
        with use_db(str(src), WorkDB.Mode.open) as a:
            killed = {
                item.job_id: result
                for item, result in a.completed_work_items
                if result.worker_outcome == WorkerOutcome.NORMAL and result.test_outcome == TestOutcome.KILLED
            }
        with use_db(str(dst), WorkDB.Mode.open) as b:
            for item in b.pending_work_items:
                if item.job_id in killed:
                    b.set_result(item.job_id, killed[item.job_id])
                    n += 1
    return n


TIMEOUT_FACTOR = 3.0  # a mutant may take this many times its tests' baseline time, plus a minute
TEST_TIMEOUT = "Timeout +++"  # pytest-timeout's banner: a test ran past its limit (a hang)
# pytest-xdist processes for one mutant's tests (--test-procs). A survivor runs every test that
# reaches its line (up to 73, four minutes, through both adapters), and survivors took 80% of a
# sample's time. Two processes were no clear gain on a loaded 2-core box (2.3 minutes a mutant
# against 2.0 with one, 2026-12-07): for a box with cores to spare.
TEST_PROCS = 1


def command_for(job: Job, group: Group, base: Baseline, workdir: Path) -> tuple[str, float]:
    """The test command for one mutant, and its timeout.

    Each test may also take ``TIMEOUT_FACTOR`` times the slowest selected test's baseline,
    plus a minute (pytest-timeout): a mutant that hangs the first test it meets is killed
    when that test runs past its limit, not after the whole selection's (26 minutes for a
    mutant of ``close_run``, which every test reaches; 2026-12-07)."""
    spec = job.item.mutations[0]
    tests = base.tests_for(group, job.module, spec.start_pos[0], spec.end_pos[0], workdir / job.module)
    launcher = [sys.executable, str(Path(__file__).with_name("in_dir.py")), str(workdir)]
    if not tests:
        note = f"no conformance test reaches {job.module}:{spec.start_pos[0]}"
        return shlex.join([sys.executable, "-c", f"print({note!r})"]), 30.0
    durations = [base.durations.get(t, 1.0) for t in tests]
    per_test = f"--timeout={TIMEOUT_FACTOR * max(durations) + 60:.0f}"
    procs = ["-n", str(TEST_PROCS)] if TEST_PROCS > 1 and len(tests) > 1 else []
    cmd = [*launcher, sys.executable, *group.pytest_args(), "-x", "-q", "--no-header", "-p", "no:cov", per_test, *procs]
    return shlex.join([*cmd, *tests]), TIMEOUT_FACTOR * sum(durations) + 60


def _marked(result):
    """``result``, its output prefixed ``timeout:`` when a test ran past its limit."""
    output = result.output or ""
    if not result.is_killed or TEST_TIMEOUT not in output or is_timeout(output):
        return result
    return attrs.evolve(result, output="timeout: " + output)


def run(
    groups: dict[str, Group],
    sessions: Path,
    base: Baseline,
    workdirs: list[Path],
    *,
    budget_s: float,
    seed: int,
    limit: int | None = None,
    only_unreached: bool = False,
    progress=None,
) -> dict[str, int]:
    """Run pending mutants of ``groups`` (module -> the slice judging it) until none is left,
    ``limit`` ran, or ``budget_s`` passed."""
    jobs = pending(list(groups), sessions, seed)
    # No reordering: the seeded order is what makes a cut-short run a uniform sample.
    if only_unreached:
        jobs = [j for j in jobs if not reached_in_process(j, groups[j.module], base)]
    if limit is not None:
        jobs = jobs[:limit]
    todo: queue.Queue[Job] = queue.Queue()
    for job in jobs:
        todo.put(job)
    deadline = time.monotonic() + budget_s
    lock = threading.Lock()
    counts = {"run": 0, "killed": 0, "survived": 0, "pending": len(jobs)}
    task = progress.add_task("mutants", total=len(jobs)) if progress else None

    def worker(workdir: Path) -> None:
        while time.monotonic() < deadline:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            spec = job.item.mutations[0]
            here = MutationSpec(
                module_path=workdir / job.module,
                operator_name=spec.operator_name,
                occurrence=spec.occurrence,
                start_pos=spec.start_pos,
                end_pos=spec.end_pos,
                operator_args=spec.operator_args,
                definition_name=spec.definition_name,
            )
            command, timeout = command_for(job, groups[job.module], base, workdir)
            result = _marked(mutate_and_test([here], command, timeout))
            with lock:
                with use_db(str(session_path(sessions, job.module)), WorkDB.Mode.open) as db:
                    db.set_result(job.item.job_id, result)
                counts["run"] += 1
                counts["pending"] -= 1
                counts["killed" if result.is_killed else "survived"] += 1
                if progress:
                    progress.update(task, advance=1, description=f"mutants ({counts['killed']} killed)")

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in workdirs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts
