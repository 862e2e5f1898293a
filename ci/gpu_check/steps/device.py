"""Step ``device``: the GPU, driver and versions, and that every module the check needs imports."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import platform
import subprocess
from pathlib import Path

from ..common import REPO, GiB

NAME, TITLE, CAP, LEAST = "device", "device, driver, versions", 60, 5
WHAT = "record the GPU, driver, CuPy, numba, RMM"
NEEDS_GPU, DRY, DRY_SKIP = False, None, None


def module_origin(name: str) -> str:
    """``VERSION (carried wheel|checkout|installed)`` of module ``name``."""
    mod = importlib.import_module(name)
    version = getattr(mod, "__version__", "")
    where = Path(getattr(mod, "__file__", "") or "?")
    site = os.environ.get("GPU_CHECK_SITE")
    if site and str(where).startswith(site):
        origin = "carried wheel"
    elif str(where).startswith(str(REPO)) and "site-packages" not in where.parts:
        origin = "checkout"
    else:
        origin = "installed"
    return f"{version} ({origin})".strip()


def run(dry: bool, out: Path, timeout: float) -> dict:
    data: dict = {"python": platform.python_version(), "machine": platform.machine()}
    required = ["numpy", "pyarrow", "numba", "dask", "distributed", "zict", "blake3", "pytest",
                "hypothesis", "xdist", "reference_impl", "conformance", "conformance.runner.plugin"]
    missing = []
    for name in required:
        try:
            data[name] = module_origin(name)
        except Exception as exc:  # noqa: BLE001 - reported
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    for name in ("cupy", "rmm", "numba.cuda"):
        try:
            data[name] = module_origin(name)
        except Exception as exc:  # noqa: BLE001
            data[name] = f"absent ({type(exc).__name__}: {str(exc)[:80]})"
    try:
        data["numba-cuda"] = md.version("numba-cuda")
    except md.PackageNotFoundError:
        data["numba-cuda"] = "absent"
    if missing:
        return {"status": "fail", "summary": "missing: " + "; ".join(missing), "data": data}
    if dry:
        return {"status": "pass", "data": data,
                "summary": f"imports ok (python {data['python']}; dask {data['dask']}; "
                           f"cupy {data['cupy'].split(' (')[0]})"}
    import cupy
    from numba import cuda

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    data.update(
        gpu=props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        memory_gib=round(props["totalGlobalMem"] / GiB, 1), sms=props["multiProcessorCount"],
        cc=f"{props['major']}.{props['minor']}", driver=rt.driverGetVersion(),
        runtime=rt.runtimeGetVersion(), numba_cuda_available=bool(cuda.is_available()))
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        data["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        data["nvidia_smi"] = f"unavailable: {exc}"
    if not data["numba_cuda_available"]:
        return {"status": "fail", "data": data, "summary": "numba.cuda sees no GPU"}
    return {"status": "pass", "data": data,
            "summary": f"{data['gpu']} ({data['memory_gib']} GiB, {data['sms']} SMs, cc {data['cc']}), "
                       f"driver {data['nvidia_smi'].split(',')[-1].strip() or data['driver']}, "
                       f"cupy {data['cupy'].split(' ')[0]}, numba {data['numba'].split(' ')[0]}, "
                       f"numba-cuda {data['numba-cuda']}, rmm {data['rmm'].split(' ')[0]}"}
