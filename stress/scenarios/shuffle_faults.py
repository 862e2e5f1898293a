"""Faults against a shuffle, on the cluster the conformance suite builds for it: a worker
SIGKILLed in each phase, a full disk (RLIMIT_FSIZE on the workers), a corrupted spill file
and the spill directories removed when the unpack phase starts. Each fault is proven to
have fired (else "not exercised"); wrong data, a hang or leftovers are violations, and so is
an error after a kill from an implementation that declares ``shuffle.recover``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from conformance.shuffle.harness import DASK_FILES, PhaseAction

from .. import data, runs
from ..record import Outcome

PHASES = ("transfer", "barrier", "unpack")
FSIZE = 4096
N_INPUTS = 8
TIMEOUT = 120.0
KILL = "shuffle: worker killed in {}"
DISK, CORRUPT, REMOVED = "shuffle: disk full", "shuffle: corrupted spill file", "shuffle: spill directory removed"
CASES = (DISK, CORRUPT, REMOVED, *(KILL.format(p) for p in PHASES))
RECOVER = "shuffle.recover"  # a kill must then give the correct result


# ----------------------------------------------------------------------------- on the workers
def fill_disk(limit: int | None) -> int:
    """A full disk on this worker (None lifts it); returns the SIGXFSZ count so far. Runs on
    the worker's event loop, its main thread, as signal.signal needs."""
    import resource
    import signal

    import stress.scenarios.shuffle_faults as me

    if limit is not None:
        me._signals = 0

        def count(*_a):
            me._signals += 1

        signal.signal(signal.SIGXFSZ, count)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY if limit is None else limit, hard))
    return getattr(me, "_signals", 0)


_signals = 0


def spill_files(root: str) -> list[str]:
    out = []
    for d, _dirs, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if not f.endswith(DASK_FILES)]
    return out


def corrupt_all(root: str) -> int:
    n = 0
    for path in spill_files(root):
        try:
            with open(path, "r+b") as f:
                size = f.seek(0, 2)
                if not size:
                    continue
                f.seek(size // 2)
                b = f.read(1)
                f.seek(size // 2)
                f.write(bytes([b[0] ^ 0xFF]))
                n += 1
        except OSError:
            pass
    return n


def remove_dirs(root: str) -> int:
    dirs = {os.path.dirname(p) for p in spill_files(root)}
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    return len(dirs)


# ----------------------------------------------------------------------------- cases
def _tables(seed: int, rows: int) -> list:
    return [data.make_table(seed, i, rows, keys=5_000) for i in range(N_INPUTS)]


def _judge(impl, case: str, tables, res: runs.Result, fired: bool, proof: str) -> Outcome:
    if isinstance(res.error, runs.Hang):
        return Outcome(impl.name, case, "violation", f"hang: {res.error}", res.seconds)
    if res.error is not None:
        text = f"{type(res.error).__name__}: {str(res.error)[:160]}"
        if not fired:
            return Outcome(impl.name, case, "violation", f"failed before the fault fired: {text}", res.seconds)
        if case.startswith("shuffle: worker") and RECOVER in impl.caps:  # SPEC 14.5
            return Outcome(impl.name, case, "violation", f"{proof}; declares {RECOVER}, yet: {text}", res.seconds)
        return Outcome(impl.name, case, "error", f"{proof}; {text}", res.seconds)
    if not fired:
        return Outcome(impl.name, case, "not exercised", "the fault never fired", res.seconds)
    schema = tables[0].schema
    problems = runs.check(tables, data.digest_all(tables, schema.names), res.outputs, N_INPUTS, schema)
    if problems:
        return Outcome(impl.name, case, "violation", f"{proof}; wrong data: {'; '.join(problems)}", res.seconds)
    return Outcome(impl.name, case, "correct", f"{proof}; every row intact", res.seconds)


class WarmUpFailed(RuntimeError):
    """A fault-free shuffle failed on a fresh cluster: no fault case can be judged there."""


def run_cases(
    impl,
    open_case: Callable[[str], AbstractContextManager[Any]],
    seed: int,
    rows: int,
    emit: Callable[[Outcome], None],
    on_case: Callable[[str], None],
) -> None:
    """Every case on a cluster of its own, from ``open_case(case)``: a removed spill
    directory, a full disk or a killed worker must not decide the next case's outcome."""
    caps = impl.caps
    phase_of = getattr(impl.adapter, "phase_of", None)
    for i, case in enumerate(CASES):
        on_case(case)
        need = None if case.startswith("shuffle: worker") else "shuffle.spill"  # kills: every shuffle
        if need and need not in caps:
            emit(Outcome(impl.name, case, "n/a", f"does not declare {need}"))
            continue
        if case != DISK and phase_of is None:
            emit(Outcome(impl.name, case, "n/a", "no phase_of(key) to time the fault by"))
            continue
        try:
            with open_case(case) as cluster:
                if case != DISK and cluster.scheduler is None:
                    emit(Outcome(impl.name, case, "n/a", "the scheduler runs elsewhere: no plugin can time the fault"))
                    continue
                emit(_case(impl, cluster, case, _tables(seed + i, rows), phase_of))
        except WarmUpFailed as exc:
            emit(Outcome(impl.name, case, "violation", str(exc)))


def _case(impl, cluster, case: str, tables, phase_of) -> Outcome:
    """One case on its own cluster, then what it left behind."""
    inputs = runs.load(cluster, tables, TIMEOUT)
    outcome = _one(impl, cluster, case, tables, inputs, phase_of)
    del inputs
    left = cluster.settled(20.0)
    if left:
        outcome = Outcome(impl.name, case, "violation",
                          f"{outcome.status}: {outcome.detail}; left behind: {'; '.join(left[:3])}", outcome.seconds)
    return outcome


def _one(impl, cluster, case, tables, inputs, phase_of) -> Outcome:
    client = cluster.client
    if case == DISK:
        client.run(fill_disk, FSIZE)
        try:
            res = runs.shuffle(cluster, inputs, N_INPUTS, TIMEOUT, measure=False)
        finally:
            signals = sum(client.run(fill_disk, None, on_error="ignore").values())
        return _judge(impl, case, tables, res, signals > 0, f"{signals} writes refused")
    if case.startswith("shuffle: worker"):
        killer = cluster.kill_in(case.rsplit(" ", 1)[1])
        try:
            res = runs.shuffle(cluster, inputs, N_INPUTS, TIMEOUT, measure=False)
        finally:
            cluster.scheduler.remove_plugin(name=f"{killer.name}-{killer.phase}")
        fired = killer.fired[0][1] if killer.fired else None
        return _judge(impl, case, tables, res, bool(fired), f"killed {fired}")
    action = corrupt_all if case == CORRUPT else remove_dirs
    plugin = PhaseAction("unpack", phase_of, lambda: action(cluster.spill_dir))
    cluster.scheduler.add_plugin(plugin, name=plugin.name)
    try:
        res = runs.shuffle(cluster, inputs, N_INPUTS, TIMEOUT, measure=False)
    finally:
        cluster.scheduler.remove_plugin(name=plugin.name)
    hit = plugin.fired[0] if plugin.fired else 0
    what = "files corrupted" if case == CORRUPT else "directories removed"
    return _judge(impl, case, tables, res, hit > 0, f"{hit} {what} at unpack")


def describe(x: Any) -> str:
    return str(x)
