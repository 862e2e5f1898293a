"""``faults``: the same faults against every implementation, side by side.

Judged implementations (``--impl``) fail the run on a violation; compared ones
(``--compare``, default every registered name) are reported only. A case an
implementation does not declare the capability for is ``n/a``, with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import data, runs
from ..cluster import open_cluster
from ..impls import Impl
from ..progress import Progress
from ..record import Outcome, RunRecord
from ..sampler import Sampler, cluster_reader
from ..settings import ROW_BYTES, Settings
from . import shuffle_faults, store_faults


def run(settings: Settings, record: RunRecord, progress: Progress, impls: list[Impl], workdir: Path) -> None:
    total = sum(len(store_faults.CASES) * ("store" in i.caps) + len(shuffle_faults.CASES) * ("shuffle" in i.caps)
                for i in impls)
    progress.start("faults", total)
    for impl in impls:
        emit = lambda o, impl=impl: _emit(record, progress, o, impl.judged)  # noqa: E731
        if impl.adapter is None:
            emit(Outcome(impl.name, "available", "unavailable", impl.unavailable or ""))
            continue
        root = workdir / impl.name
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        if "store" in impl.caps:
            _stores(impl, settings, root, emit, progress)
        if "shuffle" in impl.caps:
            _shuffles(impl, settings, root, emit, progress, record)
        record.timings[f"{impl.name} faults"] = time.perf_counter() - t0


def _emit(record: RunRecord, progress: Progress, o: Outcome, judged: bool) -> None:
    record.outcome(o, judged)
    record.mark(f"{o.impl}: {o.case.split(': ', 1)[-1]}")
    progress.advance(1, status=f"{o.impl}: {o.case} -> {o.status}")


def _stores(impl, settings, root, emit, progress) -> None:
    need = "store.spill.disk"
    cases = [(store_faults.disk_full, None), (store_faults.corrupted_file, None),
             (store_faults.removed_dir, None)]
    for (fn, extra), case in zip(cases, store_faults.CASES, strict=True):
        progress.status(f"{impl.name}: {case}")
        lacking = [c for c in (need, extra) if c and c not in impl.caps]
        if lacking:
            emit(Outcome(impl.name, case, "n/a", f"does not declare {', '.join(lacking)}"))
            continue
        t = time.perf_counter()
        try:
            o = fn(impl, settings.device, root)
        except Exception as exc:  # the case itself broke: say so, judged like a violation
            o = Outcome(impl.name, case, "violation", f"the case raised {type(exc).__name__}: {exc}")
        o.seconds = time.perf_counter() - t
        emit(o)


def _shuffles(impl, settings, root, emit, progress, record) -> None:
    dev, host = settings.device_memory, settings.host_memory
    rows = max(100, settings.data // shuffle_faults.N_INPUTS // ROW_BYTES)
    record.limits.update({"device limit": dev, "host limit": host})

    @contextmanager
    def open_case(case: str) -> Iterator[Any]:
        spill = root / "shuffle" / _slug(case)
        spill.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        with open_cluster(impl.adapter, settings, str(spill), device_limit=dev, host_limit=host) as cluster:
            starts = f"{impl.name} cluster starts"
            record.timings[starts] = record.timings.get(starts, 0.0) + time.perf_counter() - t
            warm = [data.make_table(settings.seed + 10**6, i, 500) for i in range(2)]
            res = runs.shuffle(cluster, runs.load(cluster, warm, 120), 2, 120, measure=False)
            if res.error is not None:
                raise shuffle_faults.WarmUpFailed(f"a fault-free shuffle failed on a fresh cluster: {res.error!r}")
            cluster.mark_baseline()
            with Sampler(record, cluster_reader(cluster.client, cluster.on_device, f"{impl.name} "), settings.interval):
                yield cluster

    shuffle_faults.run_cases(impl, open_case, settings.seed, rows, emit,
                             lambda case: progress.status(f"{impl.name}: {case}"))


def _slug(case: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in case.split(": ", 1)[-1])
