"""Extra finding (not in the candidate list): with memory_limit=None -- what
LocalCUDACluster/CUDAWorker pass when the host limit is disabled
(distributed.parse_memory_limit returns None for 0/None) and what
ProxifyHostFile documents as "no host->disk spilling" -- ProxyManager.__repr__
crashes in dask.utils.format_bytes(None).  __repr__ is used by the
spill-on-demand failure diagnostic, so when the OOM callback finds nothing to
spill it raises TypeError instead of logging and returning False (RMM would
then raise MemoryError).

Run: ../../../.venv-daskcuda/bin/python oom_diagnostic_none_host_limit.py
"""
import gc

from _common import install_oom_callback, new_store, verdict, versions

store = new_store(device_memory_limit=10**6, memory_limit=None)
oom = install_oom_callback(store)
try:
    repr(store.manager)
    repr_error = None
except Exception as exc:
    repr_error = exc
try:
    result = oom(1000)  # nothing stored: nothing to spill -> diagnostic path
    oom_error = None
except Exception as exc:
    oom_error, result = exc, None
verdict(
    repr_error is not None and oom_error is not None,
    "with memory_limit=None, repr(ProxyManager) and the spill-on-demand failure "
    "diagnostic raise TypeError (format_bytes(None)) instead of returning False",
    [
        versions(),
        f"repr(store.manager) -> {repr_error!r}",
        f"oom(1000) with nothing to spill -> returned {result!r}, raised {oom_error!r}",
    ],
)
store.clear()
gc.collect()
