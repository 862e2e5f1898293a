"""The real GPU for the library's tests: ``gpu_device()`` is a CudaDevice where CuPy sees a GPU.

Without one the test is skipped, unless ``PROXIFY_REQUIRE_GPU=1`` (what ``ci/gpu_check.sh``
sets on a GPU box): then a missing CuPy, GPU or ``numba.cuda`` is a failure, not a skip.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_VAR = "PROXIFY_REQUIRE_GPU"


def gpu_required() -> bool:
    return os.environ.get(REQUIRE_VAR, "") == "1"


def no_gpu(reason: str):
    if gpu_required():
        pytest.fail(f"{REQUIRE_VAR}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def gpu_device(capacity=None):
    from reference_impl.device import CudaDevice, DeviceUnavailableError

    try:
        return CudaDevice(capacity)
    except DeviceUnavailableError as exc:
        no_gpu(f"no GPU: {exc}")


def numba_cuda():
    try:
        from numba import cuda
    except ImportError as exc:
        no_gpu(f"numba.cuda is not importable ({exc}); install numba-cuda")
    return cuda
