"""Numba compile cost of the CPU partition kernels: a first process against a second one.

Every dask worker is a new process. If the kernels are not found in numba's on-disk cache,
each worker compiles them again for every key dtype it meets, which costs seconds per dtype.
This script runs, for each key case, two fresh processes one after the other with the same
empty cache directory (``NUMBA_CACHE_DIR``, a temporary one per case, so the cases do not
share work and the repo's ``__pycache__`` is untouched). Each process builds a small Table
(key with nulls, an int64 payload column), then calls ``partition_ids`` and
``partition_table`` as the shuffle does. It reports the first call's time (compile or cache
load included), the process's wall time, and numba's cache hits and misses summed over every
dispatcher.

    .venv/bin/python benchmarks/kernel_cache.py                     # every case
    .venv/bin/python benchmarks/kernel_cache.py --cases int64,string
    .venv/bin/python benchmarks/kernel_cache.py --clean-clone       # the default cache place

With ``--clean-clone`` the package is copied (without ``__pycache__``) to a temporary
directory and run from there without ``NUMBA_CACHE_DIR``: the cache goes where it goes on a
fresh clone, ``__pycache__`` next to the kernels' source.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "bool", "datetime64", "string", "multi", "all",
]

CHILD = r"""
import gc, json, sys, time
t0 = time.perf_counter()
import numpy as np
import pyarrow as pa
import numba
from numba.core.dispatcher import Dispatcher
from reference_impl.device import SimDevice
from reference_impl.table import Table
from reference_impl.table.partition import partition_ids, partition_table
t_import = time.perf_counter() - t0

case, rows = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
nulls = rng.random(rows) < 0.1

def column(name):
    if name == "bool":
        values = rng.random(rows) < 0.5
    elif name == "datetime64":
        values = rng.integers(0, 10**12, rows).astype("datetime64[ns]")
    elif name == "string":
        return pa.array([None if n else f"k{i % 97}" for i, n in enumerate(nulls)])
    elif name.startswith("float"):
        values = rng.standard_normal(rows).astype(name)
    else:
        info = np.iinfo(name)
        values = rng.integers(max(info.min, -1000), min(info.max, 1000), rows).astype(name)
    return pa.array(values, mask=nulls)

SINGLE = [c for c in CASES if c not in ("multi", "all")]
groups = {"multi": [["int64", "string", "float64"]], "all": [[c] for c in SINGLE]}
dev = SimDevice("256 MiB")
first = None
t1 = time.perf_counter()
for keys in groups.get(case, [[case]]):
    cols = {f"k{j}": column(k) for j, k in enumerate(keys)}
    cols["v"] = pa.array(np.arange(rows, dtype=np.int64))
    table = Table.from_arrow(pa.table(cols), dev)
    on = [f"k{j}" for j in range(len(keys))]
    partition_ids(table, on, 8)
    parts = partition_table(table, on, 8)
    assert sum(p.num_rows for p in parts) == rows
    del parts, table
t_first = time.perf_counter() - t1
hits = misses = 0
for d in (o for o in gc.get_objects() if isinstance(o, Dispatcher)):
    hits += sum(d.stats.cache_hits.values())
    misses += sum(d.stats.cache_misses.values())
print(json.dumps({"import_s": t_import, "first_s": t_first, "hits": hits, "misses": misses}))
"""


def run_child(case: str, rows: int, env: dict, cwd: Path) -> dict:
    """One fresh process; its own timings plus its wall time seen from here."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", f"CASES = {CASES!r}\n" + CHILD, case, str(rows)],
                         cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"{case}: child failed\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def clean_copy(dest: Path) -> Path:
    """The package as a fresh clone has it: sources only, no ``__pycache__``."""
    shutil.copytree(ROOT / "reference_impl", dest / "reference_impl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, from " + ",".join(CASES))
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--clean-clone", action="store_true",
                    help="run a source-only copy with numba's default cache place")
    args = ap.parse_args()
    cases = args.cases.split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown cases {sorted(unknown)}")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, "
          f"{os.cpu_count()} cores, {args.rows} rows, partition_ids + partition_table, 8 partitions")
    print(f"{'case':<11} {'cold call s':>11} {'cold proc s':>11} {'miss':>5} "
          f"{'warm call s':>11} {'warm proc s':>11} {'hit':>4} {'miss':>5}")
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="kernel-cache-") as tmp:
            env = dict(os.environ)
            env.pop("NUMBA_CACHE_DIR", None)
            if args.clean_clone:
                cwd = clean_copy(Path(tmp))
                env["PYTHONPATH"] = str(cwd)
            else:
                cwd = ROOT
                env["NUMBA_CACHE_DIR"] = tmp
                env["PYTHONPATH"] = str(ROOT)
            cold = run_child(case, args.rows, env, cwd)
            warm = run_child(case, args.rows, env, cwd)
        print(f"{case:<11} {cold['first_s']:>11.2f} {cold['wall_s']:>11.2f} {cold['misses']:>5} "
              f"{warm['first_s']:>11.2f} {warm['wall_s']:>11.2f} {warm['hits']:>4} "
              f"{warm['misses']:>5}", flush=True)


if __name__ == "__main__":
    main()
