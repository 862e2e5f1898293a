"""A CPU hog: one spinning process per core, so that every core is busy (flake hunts).

``python ci/cpu_hog.py [--procs N] [--seconds S] [--watch PID]``. Every spinner stops by
itself at the deadline and as soon as the watched process (default: the one that started
the hog) is gone, so a hog never outlives the run that wanted it, even one killed hard.
:func:`cpu_hog` is the context manager tests use: it starts the hog in a session of its
own and kills that whole session on exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def spin(watch: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and _alive(watch):
        for _ in range(200_000):  # about 5 ms of pure interpreter work
            pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--watch", type=int, default=os.getppid())
    args = p.parse_args(argv)
    kids = []
    for _ in range(max(1, args.procs) - 1):
        pid = os.fork()
        if pid == 0:
            spin(args.watch, args.seconds)
            os._exit(0)
        kids.append(pid)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        spin(args.watch, args.seconds)
    finally:
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
    return 0


@contextmanager
def cpu_hog(procs: int | None = None, seconds: float = 600.0) -> Iterator[subprocess.Popen]:
    """Every core busy for the ``with`` block (``procs`` spinners, default one per core)."""
    cmd = [sys.executable, __file__, "--seconds", str(seconds), "--watch", str(os.getpid())]
    if procs is not None:
        cmd += ["--procs", str(procs)]
    hog = subprocess.Popen(cmd, start_new_session=True)
    try:
        time.sleep(0.2)  # the spinners are up
        yield hog
    finally:
        try:
            os.killpg(hog.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hog.wait()


if __name__ == "__main__":
    sys.exit(main())
