"""Device-layer baselines: sim allocation overhead per call and memcpy bandwidth.

    python benchmarks/device.py [--calls 20000]

Later benchmarks print ratios against the memcpy figure measured here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, gbps, machine, memcpy_bandwidth  # noqa: E402

from reference_impl.device import SimDevice  # noqa: E402


def per_call(fn, calls: int) -> float:
    def loop():
        for _ in range(calls):
            fn()

    return best_of(3, loop) / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args(argv)

    dev = SimDevice("8 GiB")
    host = np.arange(128, dtype=np.int64)
    numpy_empty = per_call(lambda: np.empty(128, np.int64), args.calls)
    sim_empty = per_call(lambda: dev.empty(128, np.int64), args.calls)
    numpy_copy = per_call(lambda: host.copy(), args.calls)
    sim_asarray = per_call(lambda: dev.asarray(host), args.calls)
    x = dev.asarray(host)
    view = per_call(lambda: x[1:], args.calls)
    numpy_view = per_call(lambda: host[1:], args.calls)
    bandwidth = memcpy_bandwidth()

    print(f"machine: {machine()}")
    print(f"{'operation':<28}{'sim':>12}{'numpy':>12}{'overhead':>12}")
    for name, sim, base in [
        ("empty(128 x int64)", sim_empty, numpy_empty),
        ("asarray(128 x int64)", sim_asarray, numpy_copy),
        ("view x[1:]", view, numpy_view),
    ]:
        print(f"{name:<28}{sim * 1e6:>10.2f}us{base * 1e6:>10.2f}us{(sim - base) * 1e6:>10.2f}us")
    print(f"memcpy bandwidth (read+write): {gbps(bandwidth)}")


if __name__ == "__main__":
    main()
