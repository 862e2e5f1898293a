"""Per-op throughput of the reference ProxifyHostFile, zict.Buffer and dask-cuda, like with like.

Run from the repository root:

    .venv/bin/python benchmarks/store.py [--n 2000] [--size 1024] [--repeat 5] [--disk-mib 256]

Every store is the one the conformance suite judges, built by its adapter from
``conformance.runner.loader`` (``reference``, ``zict``, ``dask-cuda``) with the same keys, array sizes
and limits. Three cases:
- ``all fit``: no limit is reached;
- ``25% fit, host``: the device limit holds a quarter of the values; evicted values
  are kept serialized in host memory (ours and dask-cuda: no memory_limit). zict, as the
  suite judges it, has no host tier (it does not declare ``store.spill.host``), so it is not
  measured here: its evictions would be file writes, not like with like;
- ``25% fit, disk``: the same device limit and a host limit of 0, so every eviction
  is written to disk (ours and dask-cuda: memory_limit=0; zict: its ``File`` slow side).

Every figure is ``_common.best_of`` over ``--repeat`` runs after a warm-up: ``set``
fills a fresh store (made untimed), ``get`` reads every key back in insertion
order (with a quarter fitting, every get is a miss under LRU), ``use`` indexes
proxies held from an earlier get (not measured for zict: a value it hands out is a
plain array, so using it does not involve the store). dask-cuda runs in its own environment (``.venv-daskcuda``,
``ci/dask-cuda-env.sh``) as a child process of this script when it is not
importable here.

The disk tier (spill vs a raw write, unspill vs a raw read, same bytes, one run)
is ``benchmarks/disk_mac.py``; ``--disk-mib`` runs the store's row of it here too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import best_of, machine  # noqa: E402

CASES = {  # name: (fraction of the values the device limit holds, host limit or None,
    #         the capability a store must declare to its adapter for the case to be like with like)
    "all fit": (2.0, None, "store"),
    "25% fit, host": (0.25, None, "store.spill.host"),
    "25% fit, disk": (0.25, 0, "store.spill.disk"),
}
STORES = ("ProxifyHostFile", "zict.Buffer", "dask-cuda")


# The stores' names in the output, and the names conformance.runner.loader knows them by.
IMPLS = {"ProxifyHostFile": "reference", "zict.Buffer": "zict", "dask-cuda": "dask-cuda"}


def make_store(peer: Any, dev: Any, device_limit: int, host_limit: int | None, base: str):
    """``(store, close)``: the adapter ``peer``'s store, with the given limits, spilling under ``base``."""
    from conformance.api import StoreEnv

    directory = tempfile.mkdtemp(dir=base)
    s = peer.create_store(StoreEnv(dev, device_limit, host_limit, directory))
    return s, lambda: peer.close_store(s)


def bench_case(
    name: str, peer: Any, dev: Any, keys: list[str], arrays: list[Any], limit: int,
    host_limit: int | None, base: str, repeat: int,
) -> dict[str, float]:  # fmt: skip
    """``{op: ops/s}`` for one store (``name``, built by the adapter ``peer``) and one case."""
    n = len(keys)
    current: list[Any] = []

    def fresh() -> None:
        while current:
            current.pop()[1]()
        current.append(make_store(peer, dev, limit, host_limit, base))

    def do_set() -> None:
        s = current[0][0]
        for k, a in zip(keys, arrays, strict=True):
            s[k] = a

    def do_get() -> None:
        s = current[0][0]
        for k in keys:
            s[k]

    held: list[Any] = []

    def do_use() -> None:
        for v in held:
            v[0]

    try:
        t_set = best_of(repeat, do_set, setup=fresh)
        t_get = best_of(repeat, do_get)
        if name == "zict.Buffer":  # a held value is a plain array: no store in the use
            return {"set": n / t_set, "get": n / t_get}
        held.extend(current[0][0][k] for k in keys)
        t_use = best_of(repeat, do_use)
    finally:
        held.clear()
        while current:
            current.pop()[1]()
    return {"set": n / t_set, "get": n / t_get, "use": n / t_use}


def bench_store(name: str, n: int, size: int, repeat: int) -> dict[str, dict[str, float]]:
    """``{case: {op: ops/s}}`` for one store."""
    from conformance.runner.loader import resolve
    from reference_impl import get_device

    peer = resolve(IMPLS[name])

    dev = get_device("sim", "4 GiB")
    base = tempfile.mkdtemp(prefix="bench-store-")
    keys = [f"k{i}" for i in range(n)]
    arrays = []
    for i in range(n):
        a = dev.empty(size // 8)
        a.view(np.ndarray)[:] = i
        arrays.append(a)
    out: dict[str, dict[str, float]] = {}
    try:
        for case, (fits, host_limit, needs) in CASES.items():
            if needs not in peer.capabilities:  # e.g. zict has no host tier: it would write files
                out[case] = f"not measured: its adapter does not declare {needs}"
                continue
            limit = int(n * size * fits)
            out[case] = bench_case(
                name, peer, dev, keys, arrays, limit, host_limit, base, repeat
            )
            print(f"  {name}: {case} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out


def _dask_cuda(args: argparse.Namespace) -> dict[str, Any] | str:
    try:
        import dask_cuda  # noqa: F401

        return bench_store("dask-cuda", args.n, args.size, args.repeat)
    except ImportError:
        pass
    python = os.path.join(REPO, ".venv-daskcuda", "bin", "python")
    if not os.path.exists(python):
        return f"skipped: dask_cuda is not importable and {python} is missing (ci/dask-cuda-env.sh)"
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [python, os.path.abspath(__file__), "--only-dask-cuda", f.name,
               "--n", str(args.n), "--size", str(args.size), "--repeat", str(args.repeat)]  # fmt: skip
        if subprocess.run(cmd, cwd=REPO).returncode:
            return "skipped: the child process in .venv-daskcuda failed"
        with open(f.name) as fh:
            return json.load(fh)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024, help="bytes per array")
    ap.add_argument("--repeat", type=int, default=5, help="best of this many runs per figure")
    ap.add_argument("--disk-mib", type=int, default=0, help="also run the store's disk row")
    ap.add_argument("--only-dask-cuda", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only_dask_cuda:
        with open(args.only_dask_cuda, "w") as f:
            json.dump(bench_store("dask-cuda", args.n, args.size, args.repeat), f)
        return

    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start")
    print(f"n={args.n} arrays of {args.size} B, best of {args.repeat}\n", flush=True)
    rows: dict[str, Any] = {}
    for name in STORES[:2]:
        rows[name] = bench_store(name, args.n, args.size, args.repeat)
    rows["dask-cuda"] = _dask_cuda(args)

    print(f"\n{'case':<16}{'store':<18}{'set/s':>11}{'get/s':>11}{'use/s':>11}")
    for case in CASES:
        for name, res in rows.items():
            if isinstance(res, dict) and isinstance(res[case], dict):
                r = res[case]
                use = f"{r['use']:>11,.0f}" if "use" in r else f"{'-':>11}"
                print(f"{case:<16}{name:<18}{r['set']:>11,.0f}{r['get']:>11,.0f}{use}")
    ours = rows["ProxifyHostFile"]
    for name in STORES[1:]:
        res = rows[name]
        if not isinstance(res, dict):
            print(f"{name}: {res}")
            continue
        for case in CASES:
            if not isinstance(res[case], dict):
                print(f"{name} ({case}): {res[case]}")
                continue
            ratio = ", ".join(
                f"{op} {res[case][op] / ours[case][op]:.2f}x" for op in ("set", "get", "use")
                if op in res[case]
            )
            print(f"{name} ops/s / ours ({case}; above 1: {name} faster): {ratio}")

    if args.disk_mib:
        from benchmarks.disk_mac import bench

        base = tempfile.mkdtemp(prefix="bench-store-disk-")
        try:
            d = bench(base, args.disk_mib, 4, args.repeat, candidates=False)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        raw, st = d["raw"], d["store SpillDir"]
        print(f"\ndisk tier, {args.disk_mib} MiB in 4 MiB objects (best of {args.repeat}):")
        print(f"  spill   {st['write']:8.0f} MiB/s vs raw write {raw['write']:8.0f} MiB/s -> {st['write'] / raw['write']:.2f}x")  # fmt: skip
        print(f"  unspill {st['read']:8.0f} MiB/s vs raw read  {raw['read']:8.0f} MiB/s -> {st['read'] / raw['read']:.2f}x")  # fmt: skip
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")

if __name__ == "__main__":
    main()
