"""Step ``shuffle``: ``benchmarks/shuffle.py``'s ours and P2P on a one-GPU cluster, 1 GiB."""

from __future__ import annotations

import json
from pathlib import Path

from ..common import GiB, MiB, gbs

NAME, TITLE, CAP, LEAST = "shuffle", "shuffle benchmark, one GPU", 90, 40
WHAT = "benchmarks/shuffle.py's 'ours' and 'p2p' on a one-GPU LocalDeviceCluster, 1 GiB"
NEEDS_GPU, DRY = True, None
DRY_SKIP = "needs a GPU (CI runs the shuffle tests on sim in ci/test.sh)"


def run(dry: bool, out: Path, timeout: float) -> dict:
    import tempfile

    import distributed

    from benchmarks import shuffle as bench
    from reference_impl.shuffle import LocalDeviceCluster

    size, nparts = GiB, 32
    row_bytes = bench.arrow_nbytes(10_000) / 10_000
    rows = int(size / row_bytes / nparts)
    data, table = {}, []
    with tempfile.TemporaryDirectory() as tmp, LocalDeviceCluster(
            1, device="cuda", device_memory_limit="16GiB", memory_limit="32GiB",
            local_directory=tmp) as cluster, distributed.Client(cluster) as client:
        for method in ("ours", "p2p"):
            r = bench._measure(client, method, nparts, rows, int(rows * nparts * row_bytes),
                               verbose=False)
            data[method] = {"wall_s": round(r.wall, 2), "gbs": gbs(r.nbytes, r.wall),
                            "rss_peak": sum(r.rss_peak.values()),
                            "device_peak": sum(r.device_peak.values())}
            table.append((method, f"{r.rows:,}", data[method]["wall_s"], data[method]["gbs"],
                          f"{data[method]['device_peak'] / MiB:.0f}"))
            print(json.dumps({method: data[method]}), flush=True)
    ratio = round(data["ours"]["gbs"] / data["p2p"]["gbs"], 2)
    return {"status": "pass", "data": data,
            "table": [("method", "rows", "wall s", "GB/s", "device peak MiB"), *table],
            "summary": f"1 GiB, 32 partitions, 1 worker on the GPU: ours "
                       f"{data['ours']['gbs']} GB/s, {ratio}x P2P (rows and payload sum checked)"}
