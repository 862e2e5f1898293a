"""dask-cuda, imported only when the adapter is used: in an environment without it the
adapter's modules import fine, and using it raises :class:`DaskCudaUnavailableError` with
the fix in the message."""

from __future__ import annotations

from typing import Any

INSTALL_HINT = "dask-cuda is not installed; run ci/dask-cuda-env.sh"


try:
    from conformance.api import Unavailable as _UnavailableBase
except Exception:  # pragma: no cover - before/without the suite's api module
    _UnavailableBase = RuntimeError


class DaskCudaUnavailableError(_UnavailableBase):
    """dask-cuda (with ProxifyHostFile) cannot be imported in this environment.

    A ``conformance.api.Unavailable``, so ``--impl=dask-cuda`` becomes a usage
    error that names the fix.
    """


def import_dask_cuda() -> dict[str, Any]:
    """Import the dask-cuda pieces the adapter uses, or fail with the fix."""
    try:
        import dask_cuda  # noqa: F401
        from dask_cuda import get_device_memory_objects as gdmo
        from dask_cuda import is_device_object as ido
        from dask_cuda import proxify_device_objects as pdo
        from dask_cuda.proxify_host_file import ProxifyHostFile
        from dask_cuda.proxy_object import ProxyObject
    except ImportError as exc:
        raise DaskCudaUnavailableError(f"{INSTALL_HINT} ({exc})") from exc
    except Exception as exc:  # e.g. a CUDA/NVML probe failing at import time
        raise DaskCudaUnavailableError(
            f"dask-cuda failed to import ({type(exc).__name__}: {exc}); run ci/dask-cuda-env.sh"
        ) from exc
    return {
        "ProxifyHostFile": ProxifyHostFile,
        "ProxyObject": ProxyObject,
        "pdo": pdo,
        "gdmo": gdmo,
        "ido": ido,
    }


def dask_cuda_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dask-cuda")
    except PackageNotFoundError:  # pragma: no cover - source checkout
        import dask_cuda

        return str(dask_cuda.__version__)
