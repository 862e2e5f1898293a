"""Step ``partition``: the partition kernel's throughput against a device-to-device copy."""

from __future__ import annotations

import json
from pathlib import Path

from ..common import gbs, previous, sync

NAME, TITLE, CAP, LEAST = "partition", "partition kernel throughput", 60, 20
WHAT = "partition 10^8 rows (int64 key + 2 int64) at fanouts 16/256/1024/4096 vs D2D copy"
NEEDS_GPU, DRY_SKIP = True, None
DRY = "the measuring code on the sim device (CPU kernels), 10^5 rows"


def run(dry: bool, out: Path, timeout: float) -> dict:
    import numpy as np

    from benchmarks._common import best_of
    from reference_impl.device import SimDevice, get_device
    from reference_impl.kernels import partition

    if dry:
        dev, rows, fanouts, backend = SimDevice("1 GiB"), 10**5, (16, 256), "cpu"
    else:
        dev, rows, fanouts, backend = get_device("cuda"), 10**8, (16, 256, 1024, 4096), "cuda"
    rng = np.random.default_rng(0)
    key = dev.asarray(rng.integers(0, 2**62, rows, dtype=np.int64))
    pay = [dev.asarray(np.arange(rows, dtype=np.int64)) for _ in range(2)]
    nbytes = 3 * 8 * rows
    outs = [dev.empty(rows, np.int64) for _ in range(3)]
    ids = dev.empty(rows, np.int32)
    d2d = previous(out, "bandwidth").get("d2d_4gib_gbs")
    if d2d is None:  # measure the copy here (dry run, or the bandwidth step did not pass)
        bufs = [dev.empty(nbytes, np.uint8), dev.empty(nbytes, np.uint8)]

        def copy():
            bufs[1][...] = bufs[0]

        d2d = gbs(nbytes, best_of(3, copy, lambda: sync(dev)))
        bufs.clear()
    rows_out, data = [], {"rows": rows, "input_bytes": nbytes, "copy_gbs": d2d, "fanouts": {}}
    for n in fanouts:
        def reuse(n=n):
            partition(dev, [key], pay, n, out=outs, ids_out=ids, backend=backend)

        def api(n=n):
            partition(dev, [key], pay, n, backend=backend)

        t_reuse = best_of(3, reuse, lambda: sync(dev))
        t_api = best_of(2, api, lambda: sync(dev))
        f = {"reuse_gbs": gbs(nbytes, t_reuse), "api_gbs": gbs(nbytes, t_api)}
        f["reuse_vs_copy"] = round(f["reuse_gbs"] / d2d, 3)
        f["api_vs_copy"] = round(f["api_gbs"] / d2d, 3)
        data["fanouts"][n] = f
        rows_out.append((n, f["reuse_gbs"], f["reuse_vs_copy"], f["api_gbs"], f["api_vs_copy"]))
        print(json.dumps({"fanout": n, **f}), flush=True)
    worst = min(f["reuse_vs_copy"] for k, f in data["fanouts"].items() if k <= 1024)
    goal = "" if dry else (" (goal >= 0.5x at fanout <= 1024: " +
                           ("met" if worst >= 0.5 else "MISSED") + ")")
    return {"status": "pass", "data": data,
            "table": [("fanout", "reuse GB/s", "x copy", "api GB/s", "x copy"), *rows_out],
            "summary": f"{rows:,} rows x 24 B; worst reuse at fanout <= 1024: {worst}x the "
                       f"copy ({d2d} GB/s){goal}"}
