"""The CUDA rank kernel's two variants: which one runs where, and that the warp variant
(``match_any_sync`` + popcount, for hardware) places every row where the tile variant and
the CPU twin do.

numba's simulator has no warp intrinsics, so the warp variant is checked here on the
simulator with ``match_any_sync`` and ``syncwarp`` emulated: every thread of a block
reaches ``match_any_sync`` together (the kernel calls it in block-uniform control flow), so
it is two block barriers around a look at the warp's values; ``syncwarp`` is a barrier of
the warp's 32 threads. ``ci/gpu_check.sh`` runs both variants on a real GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from numba import config

from reference_impl.kernels import cuda as kc


@pytest.mark.parametrize(
    "simulated, forced, expected",
    [(False, None, "warp"), (True, None, "tile"), (False, "tile", "tile"),
     (False, "warp", "warp"), (True, "tile", "tile")],
)
def test_rank_variant_by_target(monkeypatch, simulated, forced, expected):
    monkeypatch.setattr(config, "ENABLE_CUDASIM", int(simulated))
    monkeypatch.setattr(kc, "RANK_VARIANT", forced)
    assert kc.rank_variant() == expected


def test_rank_variant_errors(monkeypatch):
    monkeypatch.setattr(config, "ENABLE_CUDASIM", 1)
    monkeypatch.setattr(kc, "RANK_VARIANT", "warp")
    with pytest.raises(RuntimeError, match="simulator has no match_any_sync"):
        kc.rank_variant()
    monkeypatch.setattr(config, "ENABLE_CUDASIM", 0)
    monkeypatch.setattr(kc, "RANK_VARIANT", "shuffle")
    with pytest.raises(ValueError, match="'warp', 'tile' or None"):
        kc.rank_variant()


SCRIPT = textwrap.dedent(
    """
    import threading
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)
    import numpy as np
    from numba import config
    assert config.ENABLE_CUDASIM
    from numba.cuda.simulator import kernelapi
    from reference_impl.device import SimDevice
    from reference_impl.kernels import partition
    from reference_impl.kernels import cuda as kc

    # --- the default under the simulator, and the warp variant refused there
    assert kc.rank_variant() == "tile"
    seen = []
    real_rank = kc._rank
    kc._rank = lambda shared, variant="tile": seen.append((shared, variant)) or real_rank(
        shared, variant)
    dev = SimDevice("64 MiB")
    k = dev.asarray(np.arange(10) % 3)
    partition(dev, [k], [], 4, backend="cuda")
    assert seen == [(True, "tile")], seen
    kc.RANK_VARIANT = "warp"
    try:
        partition(dev, [k], [], 4, backend="cuda")
        raise AssertionError("the warp rank ran on the simulator without its intrinsics")
    except RuntimeError as exc:
        assert "match_any_sync" in str(exc)
    kc.RANK_VARIANT = None

    # --- emulated warp intrinsics (see the test module's docstring)
    lock = threading.Lock()

    def match_any_sync(self, mask, value):
        me = threading.current_thread()
        mgr = me._manager
        with lock:
            if not hasattr(mgr, "_match"):
                mgr._match = {}
        mgr._match[me.thread_id] = int(value)
        me.syncthreads()
        warp = me.thread_id // 32
        lanes = [mgr._match[warp * 32 + j] for j in range(32)]
        me.syncthreads()  # everyone has read before anyone writes again
        assert mask == -1, mask
        return np.int32(np.uint32(sum(1 << j for j, v in enumerate(lanes) if v == int(value))))

    def syncwarp(self, mask=-1):
        me = threading.current_thread()
        mgr = me._manager
        with lock:
            if not hasattr(mgr, "_warp_barriers"):
                mgr._warp_barriers = {}
            bar = mgr._warp_barriers.setdefault(me.thread_id // 32, threading.Barrier(32))
        assert mask == -1, mask
        bar.wait(timeout=60)

    kernelapi.FakeCUDAModule.match_any_sync = match_any_sync
    kernelapi.FakeCUDAModule.syncwarp = syncwarp
    kc.rank_variant = lambda: kc.RANK_VARIANT  # let the warp variant run here
    kc.ROWS_PER_THREAD = 1  # several blocks at small sizes

    def same(a, b):
        return a.dtype == b.dtype and np.array_equal(
            dev.to_host(a).view(np.uint8), dev.to_host(b).view(np.uint8))

    rng = np.random.default_rng(3)
    N = 300  # 3 blocks; the last tile of each block part-filled
    skew = rng.integers(0, 1000, N); skew[rng.random(N) < 0.8] = 5
    cases = {
        "uniform": dev.asarray(rng.integers(-50, 50, N)),
        "skew": dev.asarray(skew),
        "one value": dev.asarray(np.full(N, 7)),
    }
    pl = dev.asarray(rng.random(N))
    runs = [(kc.SHARED_MAX, "uniform", 64), (kc.SHARED_MAX, "skew", 5),
            (kc.SHARED_MAX, "one value", 3), (4, "skew", 64)]  # 4: the global-memory path
    for limit, tag, n in runs:
        kc.SHARED_PARTITIONS_LIMIT = limit
        key = cases[tag]
        cpu = partition(dev, [key], [pl], n, backend="cpu")
        outs = {}
        for variant in ("tile", "warp"):
            kc.RANK_VARIANT = variant
            outs[variant] = partition(dev, [key], [pl], n, backend="cuda")
        for variant, r in outs.items():
            for name in ("ids", "counts", "offsets"):
                assert same(getattr(cpu, name), getattr(r, name)), (tag, n, variant, name)
            for x, y in zip(cpu.columns, r.columns):
                assert same(x, y), (tag, n, variant, limit, "column")
        print("ok", tag, n, limit)
    assert real_rank.cache_info().currsize >= 4  # (shared, global) x (tile, warp) compiled
    print("ALL-OK")
    """
)


@pytest.mark.cudasim
def test_warp_rank_matches_tile_and_cpu_under_simulator_with_emulated_intrinsics():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "No module named 'numba.cuda'" in out:
        pytest.skip("numba.cuda is not importable (install numba-cuda for the simulator)")
    assert proc.returncode == 0, out[-4000:]
    assert "ALL-OK" in proc.stdout
