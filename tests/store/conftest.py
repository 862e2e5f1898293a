"""Fixtures for the store tests: a small sim device and stores that always close."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from reference_impl import ProxifyHostFile, get_device

NB = 400  # bytes of one test array (50 float64)


@pytest.fixture
def dev():
    return get_device("sim", "64 MiB")


@pytest.fixture
def arr(dev):
    """``arr(v, n=50)``: a new device array of ``n`` float64 filled with ``v``."""

    def make(value: float = 0.0, n: int = NB // 8):
        a = dev.empty(n, "float64")
        a.view(np.ndarray).fill(value)
        return a

    return make


@pytest.fixture
def make_store(dev, tmp_path):
    stores = []

    def make(**kwargs):
        kwargs.setdefault("device", dev)
        kwargs.setdefault("device_memory_limit", 3 * NB)
        kwargs.setdefault("local_directory", str(tmp_path))
        store = ProxifyHostFile(**kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()
    gc.collect()


def value_of(x) -> float:
    """First element of a device value (real use of a proxy)."""
    return float(np.asarray(x)[0])
