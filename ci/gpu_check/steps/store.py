"""Step ``store``: ProxifyHostFile's spill and unspill against pinned and pageable copies."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..common import GiB, MiB, gbs, previous, sync

NAME, TITLE, CAP, LEAST = "store", "store spill / unspill", 50, 15
WHAT = "ProxifyHostFile spill and unspill of 64 MiB-1 GiB vs pinned and pageable copies"
NEEDS_GPU, DRY_SKIP = True, None
DRY = "the measuring code on the sim device, 4-16 MiB"


def run(dry: bool, out: Path, timeout: float) -> dict:
    import gc
    import tempfile

    import numpy as np

    from reference_impl import ProxifyHostFile
    from reference_impl.device import SimDevice, get_device

    dev = SimDevice("1 GiB") if dry else get_device("cuda")
    sizes = (4 * MiB, 16 * MiB) if dry else (64 * MiB, 256 * MiB, GiB)
    bw = previous(out, "bandwidth")
    data, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp, ProxifyHostFile(
            device=dev, device_memory_limit=4 * max(sizes), local_directory=tmp) as store:
        for size in sizes:
            value = dev.asarray(np.arange(size // 8, dtype=np.int64))
            spill, unspill = [], []
            for i in range(3):
                key = f"x{size}-{i}"
                store[key] = value if i == 0 else dev.asarray(np.arange(size // 8, dtype=np.int64))
                sync(dev)
                t0 = time.perf_counter()
                freed = store.evict(size)
                sync(dev)
                spill.append(time.perf_counter() - t0)
                assert freed >= size and store.tier_of(key) == "host", (freed, store.tier_of(key))
                t0 = time.perf_counter()
                back = store[key]
                sync(dev)
                unspill.append(time.perf_counter() - t0)
                assert store.tier_of(key) == "device"
                del back
                del store[key]
                gc.collect()
            del value
            label = f"{size // MiB} MiB"
            f = {"spill_gbs": gbs(size, min(spill)), "unspill_gbs": gbs(size, min(unspill))}
            ref = bw.get("1 GiB" if size >= GiB else "64 MiB", {})
            if ref:
                f["spill_vs_pinned_d2h"] = round(f["spill_gbs"] / ref["d2h_pinned"], 3)
                f["unspill_vs_pinned_h2d"] = round(f["unspill_gbs"] / ref["h2d_pinned"], 3)
                f["spill_vs_pageable_d2h"] = round(f["spill_gbs"] / ref["d2h_pageable"], 3)
            data[label] = f
            rows.append((label, f["spill_gbs"], f.get("spill_vs_pinned_d2h", ""),
                         f["unspill_gbs"], f.get("unspill_vs_pinned_h2d", "")))
            print(json.dumps({"size": label, **f}), flush=True)
    ratios = [f["spill_vs_pinned_d2h"] for f in data.values() if "spill_vs_pinned_d2h" in f]
    summary = ", ".join(f"{k}: spill {f['spill_gbs']} / unspill {f['unspill_gbs']} GB/s"
                        for k, f in data.items())
    if ratios:
        summary += (f"; spill vs pinned D2H {min(ratios)}x-{max(ratios)}x (goal >= 0.85x: "
                    f"{'met' if min(ratios) >= 0.85 else 'MISSED'})")
    return {"status": "pass", "data": data, "summary": summary,
            "table": [("value", "spill GB/s", "x pinned D2H", "unspill GB/s", "x pinned H2D"),
                      *rows]}
