"""The dask-cuda adapter's close when another store is still alive (dask-cuda's disk path is
one class attribute every live store spills to).

Runs only where dask-cuda is installed (``ci/dask-cuda-env.sh``'s venv); skipped elsewhere.
A store dropped without close stays alive in dask-cuda (its OOM closure holds it), and before
this fix it kept every later store's directory at that store's close: STORE-CLOSE-001's
verdict depended on whether STORE-DISK-004 ran before it.
"""

from __future__ import annotations

import gc
import os

import pytest

pytest.importorskip("dask_cuda.proxify_host_file")

from conformance.adapters.dask_cuda import adapter as make_adapter  # noqa: E402
from conformance.store.harness import (  # noqa: E402
    LIMIT,
    StoreHarness,
    files_under,
    seed_digest,
    value_digest,
)


def _tree(path) -> list[str]:
    return [os.path.join(d, n) for d, dirs, files in os.walk(path) for n in dirs + files]


def test_a_live_store_without_files_there_does_not_keep_a_closed_stores_directory(tmp_path):
    adapter = make_adapter()
    older = StoreHarness(adapter, "sim", tmp_path, device_limit=0, host_limit=0, capacity=LIMIT)
    older.store["x"] = older.value(LIMIT // 4, seed=1)  # on disk, in its own directory
    newer = StoreHarness(adapter, "sim", tmp_path, device_limit=0, host_limit=0, capacity=LIMIT)
    newer.store["y"] = newer.value(LIMIT // 4, seed=2)
    newer.close(check=False)
    assert _tree(newer.env.spill_dir) == []
    older.store["z"] = older.value(LIMIT // 4, seed=3)  # spills again: somewhere that exists
    assert files_under(older.env.spill_dir)
    older.close(check=False)
    gc.collect()


def test_a_live_stores_file_in_the_closed_location_keeps_it(tmp_path):
    adapter = make_adapter()
    older = StoreHarness(adapter, "sim", tmp_path, device_limit=0, host_limit=0, capacity=LIMIT)
    # the newer store retargets the class-level disk path to its own directory
    newer = StoreHarness(adapter, "sim", tmp_path, device_limit=0, host_limit=0, capacity=LIMIT)
    older.store["x"] = older.value(LIMIT // 4, seed=1)  # its file lands in newer's directory
    assert files_under(newer.env.spill_dir)
    newer.close(check=False)
    assert files_under(newer.env.spill_dir), "the older store's file was removed with the newer"
    assert value_digest(older.device, older.store["x"]) == seed_digest(1, LIMIT // 4)
    older.close(check=False)
    gc.collect()
