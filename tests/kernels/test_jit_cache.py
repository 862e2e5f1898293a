"""The CPU kernels come from numba's on-disk cache in every process after the first.

Every dask worker is a new process; a kernel that misses the cache costs seconds of
compilation per key dtype in each of them. The end-to-end test copies the package (sources
only, as a fresh clone has it) to a temporary directory, starts two processes at once on the
empty cache (they compile the same kernels for the same signatures in opposite orders, and
save concurrently), then a third: it must compile nothing, and all three must agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from reference_impl.kernels import jitcache

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import gc, hashlib, json, sys
    import numpy as np
    import pyarrow as pa
    from numba.core.dispatcher import Dispatcher
    from reference_impl.device import SimDevice
    from reference_impl.table import Table
    from reference_impl.table.partition import partition_ids, partition_table

    dev = SimDevice("64 MiB")
    rows = 500
    rng = np.random.default_rng(1)
    nulls = rng.random(rows) < 0.2
    table = Table.from_arrow(pa.table({
        "i": pa.array(rng.integers(-50, 50, rows).astype(np.int32), mask=nulls),
        "s": pa.array([None if m else f"s{i % 31}" for i, m in enumerate(nulls)]),
        "f": pa.array(rng.standard_normal(rows)),
    }), dev)
    def multi():  # hash_step, hash_string, ids_hist on row hashes, every scatter
        return repr([part.to_arrow().to_pydict() for part in partition_table(table, ["i", "s"], 5)])

    def single():  # ids_only on a float64 key
        return dev.to_host(partition_ids(table, "f", 7)).tobytes().hex()

    digest = {}
    for step in (multi, single) if sys.argv[1] == "forward" else (single, multi):
        digest[step.__name__] = hashlib.sha256(step().encode()).hexdigest()
    stats = [d.stats for d in gc.get_objects() if isinstance(d, Dispatcher)]
    print(json.dumps({
        "digest": digest,
        "hits": sum(sum(s.cache_hits.values()) for s in stats),
        "misses": sum(sum(s.cache_misses.values()) for s in stats),
    }))
    """
)


def _clean_copy(dest: Path) -> Path:
    shutil.copytree(ROOT / "reference_impl", dest / "reference_impl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _start(tree: Path, order: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(tree)
    return subprocess.Popen([sys.executable, "-c", SCRIPT, order], cwd=tree, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    tree = _clean_copy(tmp_path)
    cold = [_start(tree, "forward"), _start(tree, "backward")]  # racing on the empty cache
    first, second = (_result(p) for p in cold)
    warm = _result(_start(tree, "forward"))
    assert first["misses"] and second["misses"], "the cache was not empty"
    assert warm["misses"] == 0, f"a later process compiled {warm['misses']} signature(s)"
    assert warm["hits"] >= 10, warm
    assert first["digest"] == second["digest"] == warm["digest"]
    cache = tree / "reference_impl" / "kernels" / "__pycache__"
    assert list(cache.glob("cpu.ids_hist-*.nbi")), "not cached next to the source"


def test_concurrent_saves_keep_every_entry(tmp_path, monkeypatch):
    """Two writers of different signatures overlap, each dawdling after it read the index
    (numba's own save then loses one entry, or points it at the other's code); both
    entries survive, each pointing at its own data."""
    load = jitcache._LockedCacheFile._load_index

    def slow_load(self):
        overloads = load(self)
        time.sleep(0.2)
        return overloads

    monkeypatch.setattr(jitcache._LockedCacheFile, "_load_index", slow_load)
    files = [jitcache._LockedCacheFile(str(tmp_path), "kernel-1.py311", "stamp")
             for _ in range(2)]
    threads = [threading.Thread(target=f.save, args=(f"sig{k}", f"code{k}"))
               for k, f in enumerate(files)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = jitcache._LockedCacheFile(str(tmp_path), "kernel-1.py311", "stamp")
    assert [reader.load(f"sig{k}") for k in range(2)] == ["code0", "code1"]


def test_hashing_edits_invalidate_the_cache(tmp_path, monkeypatch):
    """The stamp covers hashing.py, whose functions are compiled into the kernels."""
    dep = tmp_path / "hashing.py"
    dep.write_text("A = 1\n")
    monkeypatch.setattr(jitcache, "DEPENDENCIES", (dep,))
    before = jitcache._dependency_stamp()
    dep.write_text("A = 2\n")
    assert jitcache._dependency_stamp() != before


@pytest.mark.parametrize("name", ["hash_step", "ids_hist", "ids_only", "scatter_kernel",
                                  "hash_string_kernel", "scatter_strings_kernel"])
def test_kernels_are_module_level_and_cached(name):
    """A kernel built in a closure is keyed by its pickled cells, which differ in every
    process: it would never hit."""
    from reference_impl.kernels import cpu

    kernel = getattr(cpu, name)
    assert kernel.py_func.__closure__ is None
    assert isinstance(kernel._cache, jitcache.KernelCache)
