"""Where a worker's CPU time goes in a shuffle through dask's API: py-spy on every worker.

Run from the repository root:

    .venv/bin/python benchmarks/profile_cpu.py --partitions 256 --part-size 256KiB

One ``LocalDeviceCluster`` (``benchmarks/shuffle.py``'s spec: 2 workers x 1 thread, sim
devices, 128 MiB device and host limits). Each method (``--methods``, default ours-lazy and
p2p) is warmed up once, then shuffles ``partitions`` inputs of ``part-size`` into as many
outputs through ``ddf.shuffle`` and reduces each output, as ``benchmarks/shuffle.py --lazy``
does, while ``py-spy record`` samples each worker's threads (``--rate`` per second, idle
threads left out). The samples of both workers are summed and sorted into stages by the
frames of their stacks (:data:`STAGES`, first match wins): the input's making, the shuffle's
own phases, the output's conversion and reduction, distributed's worker and comms. It prints,
per method, the CPU seconds of each stage, per shard and per output, and the top functions by
their own samples.

Needs py-spy (a dev dependency) and permission to ptrace the workers (root, or
``kernel.yama.ptrace_scope=0``). With ``--idle`` py-spy samples waiting threads too (slower:
read its wall time apart), and it prints only where the workers' task threads wait: a
thread blocked inside C looks busy to py-spy, so the stage table would count waits as CPU.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import load, machine  # noqa: E402
from benchmarks.shuffle import RUNNERS, fresh_cluster, parse_size, rows_in  # noqa: E402

# (stage, a substring of a frame "function (file)"): the first stage whose marker is in any
# frame of a stack, read from the innermost frame out, takes the sample.
STAGES: list[tuple[str, str]] = [
    ("input: make_frame (the benchmark's data)", "make_frame (benchmarks/shuffle.py"),
    ("output: reduce (frame_summary)", "frame_summary (benchmarks/shuffle.py"),
    ("ours: pandas -> Arrow (frames.to_transfer_input)", "to_transfer_input (reference_impl/shuffle/frames.py"),
    ("ours: Arrow -> pandas (frames.to_frame)", "to_frame (reference_impl/shuffle/frames.py"),
    ("ours: unpack (run.get_output)", "get_output (reference_impl/shuffle/run.py"),
    ("ours: partition + pack (run._add_chunk)", "_add_chunk (reference_impl/shuffle/run.py"),
    ("ours: keep received shards (run.receive)", "receive (reference_impl/shuffle/run.py"),
    ("ours: sends (comms)", "reference_impl/shuffle/comms.py"),
    ("ours: other shuffle code", "reference_impl/shuffle/"),
    ("p2p: add_partition (split, serialize)", "add_partition (distributed/shuffle/"),
    ("p2p: receive", "_receive (distributed/shuffle/"),
    ("p2p: get_output / unpack", "get_output_partition (distributed/shuffle/"),
    ("p2p: disk / comm buffers", "distributed/shuffle/_"),
    ("p2p: other", "distributed/shuffle/"),
    ("distributed: (de)serialization", "distributed/protocol/"),
    ("distributed: comms / tornado", "distributed/comm/"),
    ("distributed: worker state machine", "distributed/worker_state_machine.py"),
    ("distributed: worker", "distributed/worker.py"),
    ("distributed: profiler", "distributed/profile.py"),
    ("distributed: other", "distributed/"),
    ("pandas / pyarrow elsewhere", "pandas/"),
    ("asyncio / tornado loop", "asyncio/"),
]


# Leaf frames of a thread that waits (py-spy's own idle test misses some): not CPU time.
IDLE = ("select (selectors.py", "wait (threading.py", "_wait_for_tstate_lock (threading.py",
        "get (queue.py", "sleep (")


def stage_of(frames: list[str]) -> str:
    for name, marker in STAGES:
        if any(marker in f for f in frames):
            return name
    return "other"


def parse_raw(path: str) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) output: ``frame;frame;... count`` per line, outermost first."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip()
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            out.append((stack.split(";"), int(count)))
    return out


def record(pids: dict[str, int], rate: int, tmp: str, extra: tuple[str, ...] = ()):
    """Start py-spy on each process of ``pids``; returns (processes, output paths)."""
    procs, paths = [], []
    for i, (name, pid) in enumerate(pids.items()):
        path = os.path.join(tmp, f"{'here' if name == 'here' else f'w{i}'}.txt")
        procs.append(subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record", "--pid", str(pid),
             "--rate", str(rate), "--format", "raw", "--output", path, "--nonblocking", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ))
        paths.append(path)
    time.sleep(1.0)  # py-spy attaches before the clock starts
    return procs, paths


def stop(procs) -> None:
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        _, err = p.communicate(timeout=60)
        if p.returncode not in (0, -2):
            raise RuntimeError(f"py-spy failed ({p.returncode}): {err[-2000:]}")


def profile(
    client, method: str, nparts: int, rows: int, rate: int, tmp: str, idle: bool = False
) -> dict:
    """One warmed-up shuffle of ``method`` under py-spy: its wall time and the stacks
    (with ``idle``, waiting threads' too, each stack under its thread's name)."""
    runner = RUNNERS[method]
    runner(client, 4, 500)  # warm-up: imports, kernels, plugins
    pids = client.run(os.getpid)
    d = tempfile.mkdtemp(dir=tmp, prefix=method)
    procs, paths = record(pids, rate, d, ("--idle", "--threads") if idle else ())
    # this process: the client and, in a LocalDeviceCluster, the scheduler
    here_procs, here_paths = record({"here": os.getpid()}, rate, d)
    from distributed import get_task_stream

    t0 = time.perf_counter()
    try:
        with get_task_stream(client) as ts:
            got = runner(client, nparts, rows)
    finally:
        wall = time.perf_counter() - t0
        stop(procs + here_procs)
    expected = nparts * rows
    if got[0] != expected:
        raise AssertionError(f"{method}: {got[0]} rows, expected {expected}")
    stacks = [s for p in paths for s in parse_raw(p)]
    return {
        "wall": wall, "stacks": stacks, "here": parse_raw(here_paths[0]), "idle": idle,
        "tasks": len(ts.data),
    }  # fmt: skip


def cpu_samples(stacks: list[tuple[list[str], int]]):
    """``(frames, count)`` of the samples that were not waiting (:data:`IDLE`), frames being
    "function (file:line)" (py-spy's first frames name the process and thread)."""
    for frames, count in stacks:
        frames = [f for f in frames if " (" in f and not f.startswith(("thread (", "process "))]
        if frames and not any(m in frames[-1] for m in IDLE):
            yield frames, count


def task_thread_waits(stacks: list[tuple[list[str], int]]) -> collections.Counter:
    """Samples of the workers' task threads (distributed's ``Dask-Default-Threads``) that
    wait, by the innermost reference_impl frame, or distributed's idle task thread."""
    waits: collections.Counter = collections.Counter()
    for frames, count in stacks:
        if "Dask-Default-Threads" not in frames[0] or not any(m in frames[-1] for m in IDLE):
            continue
        ours = [f.rsplit(":", 1)[0] for f in frames if "reference_impl/" in f]
        waits[ours[-1] if ours else "between tasks (distributed's thread pool)"] += count
    return waits


def summarize(method: str, res: dict, nparts: int, rate: int, top: int) -> None:
    if res["idle"]:  # threads blocked in C count as busy there: only the waits are read
        waits = task_thread_waits(res["stacks"])
        print(f"\n## {method}: wall {res['wall']:.1f} s (slowed by py-spy --idle); the task "
              f"threads wait (both workers, {sum(waits.values()) / rate:.1f} s), in:")
        for fn, m in waits.most_common(top):
            print(f"  {m / rate:6.2f} s  {fn}")
        return
    stages: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    by_stage: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    total = 0
    for frames, count in cpu_samples(res["stacks"]):
        total += count
        stage = stage_of(frames[::-1])
        stages[stage] += count
        leaf = frames[-1].rsplit(":", 1)[0]
        own[leaf] += count
        by_stage[stage][leaf] += count
    sec = 1.0 / rate
    shards = nparts * nparts
    print(f"\n## {method}: wall {res['wall']:.1f} s, {total * sec:.1f} CPU-s sampled over both "
          f"workers ({total * sec / res['wall']:.2f} cores busy), {res['tasks']:,} tasks run")
    print("| stage | CPU s | share | µs per shard | ms per output |")
    print("|---|---|---|---|---|")
    for name, n in stages.most_common():
        s = n * sec
        print(f"| {name} | {s:.2f} | {n / total:.0%} | {s / shards * 1e6:.1f} | {s / nparts * 1e3:.2f} |")
    print(f"\ntop {top} functions by own samples:")
    for name, n in own.most_common(top):
        print(f"  {n * sec:6.2f} s  {n / total:5.1%}  {name}")
    for name, _n in stages.most_common(3):
        print(f"\nin {name!r}, by own samples:")
        for fn, m in by_stage[name].most_common(8):
            print(f"  {m * sec:6.2f} s  {fn}")
    here: collections.Counter = collections.Counter()
    for frames, count in cpu_samples(res["here"]):
        here[next((f.rsplit(":", 1)[0] for f in frames[::-1] if "distributed/" in f or
                   "reference_impl/" in f or "dask/" in f), frames[-1].rsplit(":", 1)[0])] += count
    print(f"\nthe client and scheduler's process: {sum(here.values()) * sec:.1f} CPU-s "
          f"({sum(here.values()) * sec / res['wall']:.2f} cores busy); by innermost dask, "
          "distributed or reference_impl frame:")
    for fn, m in here.most_common(top):
        print(f"  {m * sec:6.2f} s  {fn}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=256)
    p.add_argument("--part-size", type=parse_size, default=parse_size("256KiB"))
    p.add_argument("--methods", default="ours-lazy,p2p")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--raw", default=None, help="keep py-spy's raw output in this folder")
    p.add_argument("--idle", action="store_true", help="also sample waiting threads (py-spy "
                   "--idle --threads; slower): where the task threads wait")
    # benchmarks/shuffle.py's cluster spec
    p.add_argument("--device-capacity", default="8GiB")
    p.add_argument("--device-limit", default="128MiB")
    p.add_argument("--host-limit", default="128MiB")
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in RUNNERS]
    if unknown:
        p.error(f"unknown methods {unknown}; known: {sorted(RUNNERS)}")
    rows = rows_in(args.part_size)
    print(f"# {machine()}\n# {load()}")
    print(f"# {args.partitions} x {args.partitions} partitions of {args.part_size:,} bytes "
          f"({rows:,} rows), py-spy at {args.rate}/s")
    with tempfile.TemporaryDirectory() as tmp, fresh_cluster(args, tmp) as client:
        for method in methods:
            res = profile(client, method, args.partitions, rows, args.rate, args.raw or tmp, args.idle)
            summarize(method, res, args.partitions, args.rate, args.top)
    print(f"\n# {load()}")


if __name__ == "__main__":
    main()
