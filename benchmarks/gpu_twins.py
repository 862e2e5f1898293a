"""The CUDA partition kernels against their CPU twins, every key dtype, on a real GPU.

    python benchmarks/gpu_twins.py --rows 1e7 [--fanout 1024] [--kinds int64,string]

The same host data goes to a SimDevice (the CPU kernels) and to the GPU (``backend=
"cuda"`` on a CudaDevice); ids, counts, offsets and every output column (keys first,
then an int64 row number and a float32 payload) must be bit for bit identical.
``ci/gpu_check.sh`` runs it on 10^7 rows per key kind; ``tests/kernels/test_cuda_twins.py``
at small sizes. With ``--sim`` the "GPU" side is the CUDA kernels on a SimDevice (run it
under ``NUMBA_ENABLE_CUDASIM=1``: the simulator, for CI).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

KINDS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float32", "float64", "datetime64[ns]", "timedelta64[us]", "bool",
         "int64+nulls", "float64+nulls", "string", "string+nulls", "int32,float64,string")


def _floats(rng, n, dtype):
    x = rng.standard_normal(n).astype(dtype)
    x[rng.random(n) < 0.05] = -0.0
    x[rng.random(n) < 0.05] = 0.0
    x[rng.random(n) < 0.01] = np.inf
    bits = x.view(np.uint32 if dtype == np.float32 else np.uint64)
    nans = (np.uint32 if dtype == np.float32 else np.uint64)(
        [0x7FC00000, 0xFFC00000, 0x7F800001] if dtype == np.float32
        else [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001])
    where = rng.random(n) < 0.05  # NaN of three bit patterns
    bits[where] = nans[rng.integers(0, 3, int(where.sum()))]
    return x


def _strings(rng, n):
    """(offsets int64, chars uint8): lengths 0..24, lowercase bytes and some UTF-8."""
    lens = rng.integers(0, 25, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    chars = rng.integers(97, 123, int(offsets[-1])).astype(np.uint8)
    hi = rng.random(len(chars)) < 0.02
    chars[hi] = 0xC3  # bytes above 0x7F, hashed as bytes
    # a few repeated values, so partitions get equal keys from far-apart rows
    return offsets, chars


def host_keys(kind: str, n: int, seed: int = 0):
    """[(kind, host array | (offsets, chars), valid mask | None)] for one key kind."""
    rng = np.random.default_rng(seed)
    out = []
    for part in kind.split(","):
        base, _, nulls = part.partition("+")
        valid = (rng.random(n) > 0.1) if nulls else None
        if base == "string":
            col = _strings(rng, n)
        elif base in ("float32", "float64"):
            col = _floats(rng, n, np.dtype(base))
        elif base == "bool":
            col = rng.random(n) < 0.5
        elif base.startswith(("datetime64", "timedelta64")):
            col = rng.integers(-(2**40), 2**40, n).astype(np.int64).view(base)
            col[rng.random(n) < 0.02] = np.array("NaT", dtype=base)
        else:
            info = np.iinfo(base)
            col = rng.integers(info.min, info.max, n, dtype=base, endpoint=True)
            col[rng.random(n) < 0.3] = col[0]  # a heavy key
        out.append((base, col, valid))
    return out


def _on(device, keys):
    from reference_impl.kernels import Strings

    cols, masks = [], []
    for base, col, valid in keys:
        if base == "string":
            cols.append(Strings(device.asarray(col[0]), device.asarray(col[1])))
        else:
            cols.append(device.asarray(col))
        masks.append(None if valid is None else device.asarray(valid))
    return cols, masks


def _host(device, x):
    from reference_impl.kernels import Strings

    if isinstance(x, Strings):
        return [_host(device, x.offsets), _host(device, x.chars)]
    return np.asarray(device.to_host(x)).view(np.ndarray)


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


def check(kind: str, n: int, gpu, cpu, npartitions: int, *, seed: int = 0) -> dict:
    """Partition the same data on both twins; returns a dict with ``ok`` and what differed."""
    from reference_impl.kernels import partition

    keys = host_keys(kind, n, seed)
    rng = np.random.default_rng(seed + 1)
    payload = [np.arange(n, dtype=np.int64), rng.random(n, dtype=np.float32)]
    t0 = time.perf_counter()
    kc, mc = _on(cpu, keys)
    a = partition(cpu, kc, [cpu.asarray(p) for p in payload], npartitions, valid=mc,
                  backend="cpu")
    t_cpu = time.perf_counter() - t0
    kg, mg = _on(gpu, keys)
    pg = [gpu.asarray(p) for p in payload]
    t0 = time.perf_counter()
    b = partition(gpu, kg, pg, npartitions, valid=mg, backend="cuda")
    t_gpu = time.perf_counter() - t0
    diffs = [name for name in ("ids", "counts", "offsets")
             if not _same(_host(cpu, getattr(a, name)), _host(gpu, getattr(b, name)))]
    diffs += [f"column {i}" for i, (x, y) in enumerate(zip(a.columns, b.columns, strict=True))
              if not _same(_host(cpu, x), _host(gpu, y))]
    counts = _host(cpu, a.counts)
    return {"kind": kind, "rows": n, "npartitions": npartitions, "ok": not diffs,
            "differs": diffs, "nonempty": int((counts > 0).sum()),
            "cpu_s": round(t_cpu, 3), "gpu_s_incl_compile": round(t_gpu, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--fanout", type=int, default=1024)
    ap.add_argument("--kinds", default=",".join(KINDS).replace(",", ";"),
                    help="key kinds separated by ';' (a multi-key kind is 'int32,float64')")
    ap.add_argument("--rank", choices=["warp", "tile"], default=None,
                    help="force a rank kernel variant (default: by target)")
    ap.add_argument("--sim", action="store_true", help="CUDA kernels on a SimDevice")
    ap.add_argument("--json", action="store_true", help="one JSON line per kind")
    args = ap.parse_args(argv)
    from reference_impl.device import SimDevice, get_device
    from reference_impl.kernels import cuda as kc

    kc.RANK_VARIANT = args.rank
    n = int(args.rows)
    cpu = SimDevice("64 GiB")
    gpu = cpu if args.sim else get_device("cuda")
    bad = 0
    for kind in args.kinds.split(";"):
        r = check(kind, n, gpu, cpu, args.fanout)
        r["rank"] = kc.rank_variant()
        bad += not r["ok"]
        print(json.dumps(r) if args.json else
              f"{kind:24} {'ok' if r['ok'] else 'DIFFERS: ' + ', '.join(r['differs'])}"
              f"  ({r['nonempty']} non-empty partitions, cpu {r['cpu_s']} s, "
              f"gpu {r['gpu_s_incl_compile']} s incl. compile)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
