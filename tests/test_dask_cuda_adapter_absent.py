"""The dask-cuda adapter in an environment without dask-cuda: a clean, named failure.

dask-cuda itself is exercised by ``ci/dask-cuda-env.sh`` in its own venv; here we
only check that its absence is reported as a usage problem with the fix.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("dask_cuda") is not None:  # pragma: no cover
    pytest.skip("dask-cuda is installed here; this file checks its absence", allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]
HINT = "dask-cuda is not installed; run ci/dask-cuda-env.sh"


def test_module_imports_without_dask_cuda():
    mod = importlib.import_module("conformance.adapters.dask_cuda")
    assert callable(mod.adapter)
    assert "dask_cuda" not in sys.modules


def test_factory_raises_clear_error():
    from conformance.adapters.dask_cuda import DaskCudaUnavailableError, adapter

    with pytest.raises(DaskCudaUnavailableError) as info:
        adapter()
    assert HINT in str(info.value)


def test_error_is_the_suites_unavailable():
    from conformance.adapters.dask_cuda import DaskCudaAdapter
    from conformance.api import Unavailable

    with pytest.raises(Unavailable, match="ci/dask-cuda-env.sh"):
        DaskCudaAdapter()


def test_register_sim_raises_clear_error():
    from conformance.adapters.dask_cuda import DaskCudaUnavailableError, register_sim

    with pytest.raises(DaskCudaUnavailableError, match="ci/dask-cuda-env.sh"):
        register_sim()


def _run_suite(impl: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", f"--impl={impl}", "--device=sim",
         "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(
    not (REPO / "conformance" / "plugin.py").exists(), reason="the conformance plugin is not there yet"
)
@pytest.mark.parametrize("impl", ["dask-cuda", "conformance.adapters.dask_cuda:adapter"])
def test_suite_usage_error_names_the_fix(impl):
    proc = _run_suite(impl)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "ci/dask-cuda-env.sh" in out, out[-3000:]
