"""Step ``twins``: the CUDA kernels against their CPU twins (``benchmarks/gpu_twins.py``)."""

from __future__ import annotations

import json
from pathlib import Path

NAME, TITLE, CAP, LEAST = "twins", "CUDA kernels vs CPU twins, 10^7 rows", 100, 30
WHAT = "CUDA kernels vs CPU twins on 10^7 rows for every key kind"
NEEDS_GPU, DRY_SKIP = True, None
DRY = "CUDA kernels vs CPU twins under numba's simulator, 150 rows, 2 key kinds"
ENV_DRY = {"NUMBA_ENABLE_CUDASIM": "1"}  # what the dry run's child runs under


def run(dry: bool, out: Path, timeout: float) -> dict:
    from benchmarks import gpu_twins
    from reference_impl.device import SimDevice, get_device
    from reference_impl.kernels import cuda as kc

    cpu = SimDevice("64 GiB")
    if dry:
        from numba import config

        assert config.ENABLE_CUDASIM, "the dry run's twins step runs under the simulator"
        gpu, rows, runs = cpu, 150, [(k, None) for k in ("int64+nulls", "string+nulls")]
    else:
        gpu, rows = get_device("cuda"), 10**7
        runs = [(k, None) for k in gpu_twins.KINDS] + [("int64", "tile"), ("string", "tile")]
    results, bad = [], []
    for kind, rank in runs:
        kc.RANK_VARIANT = rank
        r = gpu_twins.check(kind, rows, gpu, cpu, 1024)
        r["rank"] = kc.rank_variant()
        results.append(r)
        if not r["ok"]:
            bad.append(f"{kind} ({r['rank']}): {', '.join(r['differs'])}")
        print(json.dumps(r), flush=True)
    kc.RANK_VARIANT = None
    return {"status": "fail" if bad else "pass", "data": {"runs": results},
            "table": [("key kind", "rank", "rows", "identical", "CPU s", "GPU s (incl. compile)"),
                      *[(r["kind"], r["rank"], f"{r['rows']:,}", "yes" if r["ok"] else "NO",
                         r["cpu_s"], r["gpu_s_incl_compile"]) for r in results]],
            "summary": (f"DIFFER: {'; '.join(bad)}" if bad else
                        f"{len(results)} runs of {rows:,} rows identical (ids, counts, offsets, "
                        f"every column){' under the simulator' if dry else ''}")}
