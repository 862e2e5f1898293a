"""``python -m stress SCENARIO [options]``: parse, check, run, report, exit status.

Exit status: 0 no violation; 1 a violation (each named in the last lines and the report);
2 bad input (one line, before anything starts); 130 interrupted (partial report written).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import SCENARIO_NAMES, report
from .impls import load, registered
from .interrupt import Interrupt
from .progress import Progress
from .record import RunRecord
from .settings import Settings, UsageError, check, size

DEFAULTS = {  # per scenario: sizes that make a meaningful run of a minute or so
    "shuffle": {"device_memory": "256MiB", "duration": None},
    "store-churn": {"device_memory": "64MiB", "duration": 20.0},
    "faults": {"device_memory": "512KiB", "duration": None},  # shuffles of 4 MiB, host 256 KiB
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m stress", description=__doc__.splitlines()[0])
    p.add_argument("scenario", help=f"one of {', '.join(SCENARIO_NAMES)}")
    p.add_argument("--impl", action="append", help="implementation to judge (repeatable; default reference)")
    p.add_argument("--compare", action="append",
                   help="faults: peers shown side by side, not judged (default: every registered one; 'none')")
    p.add_argument("--device", default="sim", help="sim, cuda or auto")
    p.add_argument("--workers", type=int, default=2, help="workers (one per GPU on cuda; stores in store-churn)")
    p.add_argument("--device-memory", help="device limit per worker (e.g. 256MiB)")
    p.add_argument("--host-memory", help="host limit per worker before disk (default: = device memory)")
    p.add_argument("--data", help="bytes per shuffle (default: 4x the aggregate device memory)")
    p.add_argument("--partition-size", help="bytes per input partition (default: device memory / 8)")
    p.add_argument("--duration", type=float, help="seconds: keep going until then (shuffle: more rounds)")
    p.add_argument("--rounds", type=int, default=1, help="shuffle rounds at least")
    p.add_argument("--kill-every", type=float,
                   help="shuffle: SIGKILL a random worker every SECONDS while a shuffle runs")
    p.add_argument("--threads", type=int, default=4, help="store-churn threads per store")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="stress-report", help="report directory")
    p.add_argument("--scheduler", help="address of an existing cluster to run on")
    p.add_argument("--interval", type=float, default=0.25, help="seconds between timeline samples")
    p.add_argument("--spill-dir", help="where spill files go (default: a new directory in --out)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def configure(argv: list[str] | None) -> Settings:
    a = parser().parse_args(argv)
    if a.scenario not in SCENARIO_NAMES:
        raise UsageError(f"unknown scenario {a.scenario!r}: choose one of {', '.join(SCENARIO_NAMES)}")
    if a.device not in ("sim", "cuda", "auto"):
        raise UsageError(f"--device {a.device!r}: choose sim, cuda or auto")
    device = a.device
    if device == "auto":
        from reference_impl.device import cuda_available

        device = "cuda" if cuda_available() else "sim"
    d = DEFAULTS[a.scenario]
    dev_mem = size(a.device_memory or d["device_memory"], "--device-memory")
    host = size(a.host_memory, "--host-memory") if a.host_memory else (
        dev_mem // 2 if a.scenario == "faults" else dev_mem)
    data = size(a.data, "--data") if a.data else 4 * a.workers * dev_mem
    compare = a.compare if a.compare is not None else (registered() if a.scenario == "faults" else [])
    compare = [] if compare == ["none"] else compare
    s = Settings(
        scenario=a.scenario,
        out=Path(a.out),
        impls=tuple(a.impl or ["reference"]),
        compare=tuple(compare),
        device=device,
        workers=a.workers,
        device_memory=dev_mem,
        host_memory=host,
        data=data,
        partition_size=size(a.partition_size, "--partition-size"),
        duration=a.duration if a.duration is not None else d["duration"],
        rounds=a.rounds,
        kill_every=a.kill_every,
        threads=a.threads,
        seed=a.seed,
        scheduler=a.scheduler,
        interval=a.interval,
        spill_dir=Path(a.spill_dir) if a.spill_dir else None,
        progress=not a.no_progress,
    )
    check(s)
    return s


def _children_left(timeout: float = 20.0) -> list[int]:
    """Our child processes still alive after the clusters closed (killed, then named)."""
    import psutil

    from conformance.shuffle.workers import fork_server_pid

    me = psutil.Process()
    deadline = time.monotonic() + timeout
    while True:
        kids = [p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        # multiprocessing's own helpers, which live as long as this process: the resource
        # tracker, and the fork server (distributed's forkserver method forks each worker from
        # it; the workers it forked are its children, and they are counted)
        server = fork_server_pid()
        kids = [
            p for p in kids
            if p.pid != server and "resource_tracker" not in " ".join(_cmdline(p))
        ]  # fmt: skip
        if not kids or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for p in kids:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(kids, timeout=10)  # a process being killed may still write to disk
    return [p.pid for p in kids]


def _cmdline(p) -> list[str]:
    try:
        return p.cmdline()
    except Exception:
        return []


def main(argv: list[str] | None = None) -> int:
    try:
        settings = configure(argv)
        from .scenarios import SCENARIOS

        impls = load(list(settings.impls), list(settings.compare))
    except UsageError as exc:
        print(f"stress: error: {exc}", file=sys.stderr)
        return 2
    record = RunRecord(settings.scenario, settings.as_dict())
    record.impls = {i.name: i.describe() for i in impls}
    settings.out.mkdir(parents=True, exist_ok=True)
    root = settings.spill_dir or settings.out
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="spill-", dir=root))
    record.settings["spill_dir"] = str(workdir)
    progress = Progress(settings.progress)
    with Interrupt() as interrupt:
        try:
            SCENARIOS[settings.scenario](settings, record, progress, impls, workdir)
        except KeyboardInterrupt:
            record.interrupted = True
        except UsageError as exc:
            record.error = str(exc)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            interrupt.taken.set()
            progress.stop()
            left = _children_left()
            if left:
                record.violate(f"worker processes left running after the run: pids {left}")
            shutil.rmtree(workdir, ignore_errors=True)
            if workdir.exists():
                record.violate(f"spill directory {workdir} could not be removed")
            report.write(record, settings.out)
    _print_end(record, settings.out)
    if record.interrupted:
        return 130
    return 0 if record.ok else 1


def _print_end(record: RunRecord, out: Path) -> None:
    head = "interrupted" if record.interrupted else ("PASS" if record.ok else "FAIL")
    print(f"stress {record.scenario}: {head} in {record.now():.1f} s; report in {out}/report.md")
    if record.error:
        print(f"  error: {record.error}")
    for v in record.violations:
        print(f"  violation: {v}")
