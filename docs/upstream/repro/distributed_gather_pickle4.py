"""A worker's and the scheduler's memory while a client gathers one pandas result through
the scheduler (distributed's default for a client outside the cluster) and directly from
the worker. Each runs in its own process, so each traced peak is that process's alone."""

import tracemalloc

import distributed
import numpy as np
import pandas as pd
from distributed.deploy.subprocess import SubprocessCluster


def make_frame():  # 2.67 MiB, three Arrow-backed columns
    n = 116_508
    frame = pd.DataFrame({"a": np.arange(n), "b": np.arange(n) * 0.5, "c": np.arange(n)})
    return frame.convert_dtypes(dtype_backend="pyarrow")


def start_tracing(dask_scheduler=None):
    tracemalloc.start()


def traced_peak(dask_scheduler=None):
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


if __name__ == "__main__":
    with (
        SubprocessCluster(n_workers=1, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        result = client.submit(make_frame)
        size = result.result().memory_usage().sum()
        for direct in (False, True):
            client.run(start_tracing)
            client.run_on_scheduler(start_tracing)
            client.gather(result, direct=direct)
            (worker,) = client.run(traced_peak).values()
            scheduler = client.run_on_scheduler(traced_peak)
            how = "direct from the worker" if direct else "through the scheduler "
            print(f"gathered {how}: worker peak {worker / size:.1f}x, "
                  f"scheduler peak {scheduler / size:.1f}x the result")
