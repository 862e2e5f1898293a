"""The time a shuffle takes to recover from a worker killed mid-shuffle, as a ratio to a clean
run of the same shuffle on the same cluster: ours, distributed's P2P and dask's tasks.

Run from the repository root:

    .venv/bin/python benchmarks/shuffle_recovery.py                 # 64 MiB, ours,p2p,tasks
    .venv/bin/python benchmarks/shuffle_recovery.py --size 256MiB --repeats 3 --phase unpack

Set-up, per method: a fresh ``LocalDeviceCluster`` of 2 workers (the one of
``benchmarks/shuffle.py``: a SimDevice each, a host tier, then disk; nannies restart a killed
worker), a warm-up shuffle, then ``--repeats`` pairs of runs on the same data: a clean run,
and a run in which a scheduler plugin SIGKILLs a worker at a phase boundary (transfer: the
worker whose first transfer task just finished; unpack: the worker that gets the first
unpack task). After each killed run the nanny brings the worker back and a small shuffle
warms it up (imports, kernels), so that the next clean run does not pay for that. Every run's (rows, payload sum) is checked against the input's, so a recovery that
lost rows fails the benchmark instead of timing it. The figure is the median of the killed
runs over the median of the clean ones: 1.0 would be a free recovery.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks.shuffle import RUNNERS, arrow_nbytes, fresh_cluster, mib, parse_size  # noqa: E402
from conformance.shuffle.harness import worker_addresses  # noqa: E402

METHODS = ("ours", "p2p", "tasks")


def phase_of(method: str, key: str) -> str | None:
    """The phase of a task key, per method (the conformance adapters' ``phase_of``)."""
    key = key.strip("('\"")
    if method == "ours":
        for phase in ("transfer", "barrier", "unpack"):
            if key.startswith("devshuffle-") and f"-{phase}" in key:
                return phase
        return None
    if method == "p2p":
        prefixes = {"shuffle-transfer-": "transfer", "shuffle-barrier-": "barrier", "p2pshuffle-": "unpack"}
        return next((phase for p, phase in prefixes.items() if key.startswith(p)), None)
    if key.startswith(("group-", "split-", "stage-")):
        return "transfer"
    return "unpack" if key.startswith("taskshuffle-") else None


@dataclass
class Killer(SchedulerPlugin):
    """Scheduler plugin: SIGKILL one worker at the phase boundary (see the module's text)."""

    method: str
    phase: str
    pids: dict[str, int]
    scheduler: Any
    fired: list[str] = field(default_factory=list)
    name: str = "benchmark-recovery-killer"

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        when = "memory" if self.phase == "transfer" else "processing"
        if self.fired or finish != when or phase_of(self.method, str(key)) != self.phase:
            return
        ts = self.scheduler.tasks.get(key)
        if ts is None:
            return
        holders = [ws.address for ws in ts.who_has] if when == "memory" else [ts.processing_on.address]
        worker = next((w for w in sorted(holders) if w in self.pids), None)
        if worker is not None:
            os.kill(self.pids[worker], signal.SIGKILL)
            self.fired.append(worker)


def _wait_workers(client, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(worker_addresses(client)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the nanny did not bring a worker back within {timeout:.0f} s")
        time.sleep(0.1)


def _timed(runner, client, nparts: int, rows: int) -> float:
    expected_rows = nparts * rows
    expected = (expected_rows, expected_rows * (expected_rows - 1) // 2)
    t0 = time.perf_counter()
    got = runner(client, nparts, rows)
    wall = time.perf_counter() - t0
    if got != expected:
        raise AssertionError(f"got (rows, payload sum) {got}, expected {expected}")
    return wall


def measure(args, tmp: str, method: str, nparts: int, rows: int) -> tuple[list[float], list[float]]:
    runner = RUNNERS[method]
    clean, killed = [], []
    with fresh_cluster(args, tmp) as client:
        scheduler = client.cluster.scheduler
        runner(client, 4, 500)  # warm-up: imports, kernels, plugins
        for i in range(args.repeats):
            clean.append(_timed(runner, client, nparts, rows))
            plugin = Killer(method, args.phase, client.run(os.getpid), scheduler)
            name = f"{plugin.name}-{i}"
            scheduler.add_plugin(plugin, name=name)
            try:
                killed.append(_timed(runner, client, nparts, rows))
            finally:
                scheduler.remove_plugin(name=name)
            if not plugin.fired:
                raise RuntimeError(f"{method}: the killer never fired in the {args.phase} phase")
            print(f"  {method} #{i + 1}: clean {clean[-1]:.2f} s, killed ({plugin.fired[0]}) "
                  f"{killed[-1]:.2f} s", flush=True)
            _wait_workers(client, 2)
            runner(client, 4, 500)  # the restarted worker's own warm-up, not the next clean run's
    return clean, killed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="64MiB", help="input bytes (Arrow)")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--phase", default="transfer", choices=("transfer", "unpack"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device-limit", default="128MiB")
    ap.add_argument("--host-limit", default="128MiB")
    ap.add_argument("--device-capacity", default="8GiB")
    args = ap.parse_args(argv)
    nbytes = parse_size(args.size)
    rows = max(1, nbytes // args.partitions // arrow_nbytes(1))
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        ap.error(f"unknown methods {unknown}; choose from {list(METHODS)}")
    print(f"{mib(nbytes)} MiB in {args.partitions} partitions ({rows:,} rows each), 2 workers, "
          f"a worker killed in {args.phase}, {args.repeats} pairs per method; load {os.getloadavg()[0]:.1f}",
          flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as tmp:
        for method in methods:
            results[method] = measure(args, tmp, method, args.partitions, rows)
    print("\n| method | clean (median s) | killed (median s) | killed / clean | vs p2p |")
    print("|---|---|---|---|---|")
    ratio = {m: statistics.median(k) / statistics.median(c) for m, (c, k) in results.items()}
    for m, (c, k) in results.items():
        vs = f"{ratio[m] / ratio['p2p']:.2f}" if "p2p" in ratio else "n/a"
        print(f"| {m} | {statistics.median(c):.2f} | {statistics.median(k):.2f} | {ratio[m]:.2f} | {vs} |")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
