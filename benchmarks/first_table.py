"""Time to the first table: an in-house failing store's STORE slice, wall clock (issue 43).

Runs ``pytest conformance --impl=inhouse_store:adapter --conformance-ids='STORE-*'`` (the
newcomer's store of ``tests/meta/inhouse_store.py``, which fails several IDs and its state
machines) in a subprocess, once per ``--conformance-shrink`` mode asked for, and prints the
wall time until pytest printed its table, with the failing machines' first line.

    .venv/bin/python benchmarks/first_table.py [bounded] [full] [none]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(mode: str) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "tests" / "meta"))
    cmd = [sys.executable, "-m", "pytest", "conformance", "--impl=inhouse_store:adapter",
           "--conformance-ids=STORE-*", f"--conformance-shrink={mode}", "-n", "0",
           "-p", "no:cacheprovider", "-q", "--tb=no"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    assert "| **total** |" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    total = re.search(r"\| \*\*total\*\* \| ([^|]*)\|", proc.stdout).group(1).strip()
    states = re.findall(r"\| (STORE-STATE-00\d) \| ([^|]*)\|", proc.stdout)
    return wall, f"{total}; " + ", ".join(f"{i} {c.strip()}" for i, c in states)


def main(argv: list[str]) -> None:
    print(f"cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f}")
    for mode in argv or ["bounded"]:
        wall, summary = run(mode)
        print(f"shrink={mode}: first table after {wall:.1f} s wall ({summary})")


if __name__ == "__main__":
    main(sys.argv[1:])
