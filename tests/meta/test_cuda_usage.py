"""``--device=cuda`` where the cuda device cannot be built is one usage error at start-up
(exit 4, one ``ERROR:`` line, no report), not a FAIL row per test blaming the implementation."""

from __future__ import annotations

import os

import pytest

from conftest import META, REPO, run_suite
from reference_impl.device import cuda_available

NO_DEVICES = "class _R:\n    @staticmethod\n    def getDeviceCount():\n        {}\nclass cuda:\n    runtime = _R\n"


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
@pytest.mark.parametrize(
    "fake_cupy, message",
    [
        (None, "--device=cuda: "),
        ("raise ImportError('no libcuda')", "the cuda device needs CuPy"),
        (NO_DEVICES.format("raise RuntimeError('cudaErrorNoDevice')"),
         "CuPy cannot reach a GPU: cudaErrorNoDevice"),
        (NO_DEVICES.format("return 0"), "CuPy sees no GPU on this machine"),
    ],
    ids=["as-is", "cupy-import-fails", "no-gpu-reachable", "zero-gpus"],
)
def test_device_cuda_without_a_gpu_is_one_usage_error(tmp_path, fake_cupy, message):
    env = None
    if fake_cupy is not None:
        fake = tmp_path / "fake"
        fake.mkdir()
        (fake / "cupy.py").write_text(fake_cupy)
        env = {"PYTHONPATH": os.pathsep.join(map(str, (META, REPO, fake)))}
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--device=cuda", "--conformance-ids=STORE-MAP-001"],
        tmp_path, timeout=300, env_extra=env)
    assert proc.returncode == 4, (proc.stdout + proc.stderr)[-3000:]
    assert message in proc.stderr, proc.stderr
    assert "--device=cuda" in proc.stderr and "--device=sim" in proc.stderr, proc.stderr
    assert proc.stderr.count("ERROR:") == 1, proc.stderr
    assert "FAIL" not in proc.stdout and "passed" not in proc.stdout, proc.stdout
    assert report is None
