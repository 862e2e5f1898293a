"""On a real GPU: the CUDA kernels on a CudaDevice give output identical to the CPU twins
(``benchmarks/gpu_twins.py``: ids, counts, offsets, every column) for every key kind, at the
shared-memory and global-memory fanouts and with both rank variants; bad input raises before
anything is allocated on the GPU. Skipped without a GPU (failed under PROXIFY_REQUIRE_GPU=1).
"""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from reference_impl.device import SimDevice
from reference_impl.kernels import cuda as kc
from reference_impl.kernels import partition

REPO = Path(__file__).resolve().parents[2]


def _twins():
    name = "benchmarks.gpu_twins"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "gpu_twins.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def cuda_gpu(gpu):
    from gpu_support import numba_cuda

    numba_cuda()
    return gpu


CASES = [(kind, "warp") for kind in _twins().KINDS] + [
    (kind, "tile") for kind in ("int64", "float64+nulls", "string+nulls", "int32,float64,string")]


@pytest.mark.parametrize("kind, rank", CASES)
def test_cuda_matches_cpu(cuda_gpu, kind, rank, monkeypatch):
    monkeypatch.setattr(kc, "RANK_VARIANT", rank)
    for fanout in (7, 1024, 5000):  # 5000 > 4096: the global-memory histogram and cursors
        r = _twins().check(kind, 100_003, cuda_gpu, SimDevice("1 GiB"), fanout)
        assert r["ok"], r


def test_bad_input_allocates_nothing_on_the_gpu(cuda_gpu):
    gc.collect()
    base = cuda_gpu.bytes_in_use()
    k = cuda_gpu.asarray(np.arange(10))
    short = cuda_gpu.asarray(np.arange(9))
    gc.collect()
    held = cuda_gpu.bytes_in_use()
    with pytest.raises(ValueError, match="rows"):
        partition(cuda_gpu, [k], [short], 4)
    with pytest.raises(ValueError, match="npartitions"):
        partition(cuda_gpu, [k], [], 0)
    with pytest.raises(TypeError, match="not an array of device"):
        partition(cuda_gpu, [np.arange(10)], [], 4)
    assert cuda_gpu.bytes_in_use() == held
    del k, short
    gc.collect()
    assert cuda_gpu.bytes_in_use() == base
