"""An output partition as the frame meta says (``reference_impl.shuffle.frames.to_frame``),
for a meta of ``pd.ArrowDtype`` columns (``dtype_backend="pyarrow"``), against the
conversion it replaced, measured in the same run.

    python benchmarks/frame_output.py [--rows 1e6] [--repeat 5]

``to_frame``: ``to_pandas`` keeps the Arrow types meta holds as ``pd.ArrowDtype`` as Arrow.
Baseline: plain ``to_pandas`` (numpy columns), then each column cast back to meta's dtype,
as ``to_frame`` did before. ``pool MB`` is what Arrow's memory pool holds once the frame is
built (the Table's ``to_arrow`` wraps its buffers, so the baseline's casts show there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, machine  # noqa: E402

from reference_impl import Table  # noqa: E402
from reference_impl.device import SimDevice  # noqa: E402
from reference_impl.shuffle.frames import to_frame  # noqa: E402


def numpy_then_cast(table: Table, meta: pd.DataFrame) -> pd.DataFrame:
    out = table.to_arrow().to_pandas()
    for name in meta.columns:
        if out[name].dtype != meta[name].dtype:
            out[name] = out[name].astype(meta[name].dtype)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=float, default=1e6)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    rows = int(args.rows)
    rng = np.random.default_rng(0)
    data = pa.table({
        "k": pa.array(rng.integers(0, 2**40, rows)),
        "v": pa.array(rng.random(rows), mask=rng.random(rows) < 0.05),
        "s": pa.array([f"s{i % 997}" for i in range(rows)]),
    })  # fmt: skip
    device = SimDevice("4 GiB")
    table = Table.from_arrow(data, device)
    meta = data.schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    print(f"# {rows:,} rows (int64, float64 with nulls, string), meta of pd.ArrowDtype; {machine()}")
    print("| conversion | time | vs baseline | pool MB |")
    print("|---|---|---|---|")
    results = {}
    for name, fn in [("numpy, then cast to meta (baseline)", numpy_then_cast), ("to_frame", to_frame)]:
        seconds = best_of(args.repeat, lambda fn=fn: fn(table, meta))
        kept = fn(table, meta)
        pool = pa.total_allocated_bytes()
        del kept
        results[name] = (seconds, pool)
    base = results["numpy, then cast to meta (baseline)"][0]
    for name, (seconds, pool) in results.items():
        print(f"| {name} | {seconds * 1e3:.1f} ms | {seconds / base:.2f}x | {pool / 1e6:.1f} |")
    got, want = to_frame(table, meta), numpy_then_cast(table, meta)
    pd.testing.assert_frame_equal(got, want)  # the same frame, whichever way


if __name__ == "__main__":
    main()
