"""A worker's traced memory while a client outside the cluster fetches one pandas result:
through the scheduler (distributed's default for such a client) and direct from the worker.
The figures behind "reference-in-dask, SHUF-BOUND-003: the suite's own fetch through the
scheduler" in docs/findings/reference.md. None of the reference's code runs here.

The scheduler's comms pin pickle protocol 4 ("common denominator", distributed/scheduler.py),
so the worker pickles a pandas frame in band for it; direct comms use protocol 5, whose
out-of-band buffers are the frame's own. First the same comparison without a cluster:
``pickle.dumps`` of the frame under protocols 4 and 5.

Run: .venv/bin/python docs/findings/reference-repro/gather_through_the_scheduler.py
"""

from __future__ import annotations

import pickle
import tracemalloc

import distributed
import numpy as np
import pandas as pd
import pyarrow as pa

MIB = 2**20
ROWS = 116_508  # three 8-byte columns: 2.67 MiB, an output of SHUF-BOUND-003's case


def make_frame(rows: int = ROWS) -> pd.DataFrame:
    """Like an output of the suite's front-end adapters: ``pd.ArrowDtype`` columns."""
    arrow = pa.table({"k0": np.arange(rows), "p0": np.arange(rows) * 0.5, "row_id": np.arange(rows)})
    return arrow.to_pandas(types_mapper=pd.ArrowDtype)


def pickle_peak(frame: pd.DataFrame, protocol: int) -> int:
    kwargs = {"buffer_callback": [].append} if protocol >= 5 else {}
    tracemalloc.start()
    try:
        pickle.dumps(frame, protocol=protocol, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def start_tracing() -> bool:
    tracemalloc.start()
    tracemalloc.reset_peak()
    return True


def traced_peak() -> int:
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main() -> None:
    frame = make_frame()
    size = frame.memory_usage().sum()
    print(f"one frame of {size / MIB:.2f} MiB")
    for protocol in (4, 5):
        peak = pickle_peak(frame, protocol)
        print(f"  pickle.dumps, protocol {protocol}: traced peak {peak / MIB:.2f} MiB ({peak / size:.1f}x)")
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        result = client.submit(make_frame, pure=False)
        distributed.wait(result)
        for direct in (False, True):
            client.run(start_tracing)
            got = client.gather(result, direct=direct)
            assert len(got) == ROWS
            (peak,) = client.run(traced_peak).values()
            how = "direct from the worker" if direct else "through the scheduler (the default)"
            print(f"  gathered {how}: the worker's traced peak {peak / MIB:.2f} MiB ({peak / size:.1f}x)")


if __name__ == "__main__":  # the cluster's workers are spawned processes
    main()
