"""Step ``bandwidth``: the copy bandwidths the other steps' figures are measured against."""

from __future__ import annotations

from pathlib import Path

from ..common import GiB, MiB, gbs

NAME, TITLE, CAP, LEAST = "bandwidth", "copy bandwidth (denominators)", 60, 15
WHAT = "D2D copy on 4 GiB; pinned and pageable H2D/D2H at 1 MiB, 64 MiB, 1 GiB"
NEEDS_GPU, DRY, DRY_SKIP = True, None, "needs a GPU (CuPy copies)"


def run(dry: bool, out: Path, timeout: float) -> dict:
    import cupy as cp
    import cupyx
    import numpy as np

    from benchmarks._common import best_of

    rt = cp.cuda.runtime
    sync = rt.deviceSynchronize

    def copy_seconds(dst: int, src: int, nbytes: int, kind: int, reps: int) -> float:
        return best_of(reps, lambda: rt.memcpy(dst, src, nbytes, kind), sync)

    n = 4 * GiB
    bufs = [cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)]
    bufs[0].fill(1)
    t = copy_seconds(bufs[1].data.ptr, bufs[0].data.ptr, n, rt.memcpyDeviceToDevice, 5)
    data = {"d2d_4gib_gbs": gbs(n, t), "d2d_4gib_rw_gbs": gbs(2 * n, t)}
    bufs.clear()
    rows = [("D2D 4 GiB", data["d2d_4gib_gbs"], "", "")]
    for size, reps, label in ((MiB, 50, "1 MiB"), (64 * MiB, 10, "64 MiB"), (GiB, 3, "1 GiB")):
        dev = cp.empty(size, cp.uint8)
        pinned = cupyx.empty_pinned(size, np.uint8)
        pinned[...] = 1
        pageable = np.ones(size, np.uint8)
        fig = {}
        for host, kind in ((pinned, "pinned"), (pageable, "pageable")):
            ptr = host.ctypes.data
            fig[f"h2d_{kind}"] = gbs(size, copy_seconds(dev.data.ptr, ptr, size,
                                                        rt.memcpyHostToDevice, reps))
            fig[f"d2h_{kind}"] = gbs(size, copy_seconds(ptr, dev.data.ptr, size,
                                                        rt.memcpyDeviceToHost, reps))
        data[label] = fig
        rows.append((label, "", f"{fig['h2d_pinned']} / {fig['h2d_pageable']}",
                     f"{fig['d2h_pinned']} / {fig['d2h_pageable']}"))
    return {"status": "pass", "data": data,
            "table": [("copy", "D2D GB/s", "H2D pinned / pageable GB/s",
                       "D2H pinned / pageable GB/s"), *rows],
            "summary": f"D2D {data['d2d_4gib_gbs']} GB/s (payload; x2 read+write); "
                       f"1 GiB pinned H2D {data['1 GiB']['h2d_pinned']}, D2H "
                       f"{data['1 GiB']['d2h_pinned']} GB/s; pageable D2H "
                       f"{data['1 GiB']['d2h_pageable']} GB/s"}
