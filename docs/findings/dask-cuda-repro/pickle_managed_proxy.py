"""Candidate: a *managed* proxy (one held by a ProxifyHostFile) cannot be
pickled, because ProxyObject.__reduce__ pickles its ProxyDetail, whose
``manager`` attribute is the ProxyManager (which holds threading locks).
dask-cuda's own test (test_pickle_proxy_object) only pickles unmanaged proxies.

Run: ../../../.venv-daskcuda/bin/python pickle_managed_proxy.py
"""
import gc
import pickle

from _common import DevArray, new_store, tier, verdict, versions
from dask_cuda.proxy_object import asproxy

# control: an unmanaged proxy round-trips
unmanaged = asproxy(DevArray(100, 5))
back = pickle.loads(pickle.dumps(unmanaged))
control_ok = back.buf.sum() == 500

store = new_store(device_memory_limit=10**6, memory_limit=10**6)
store["k"] = DevArray(100, 5)
p = store["k"]
tier_before = tier(p)
try:
    data = pickle.dumps(p)
    error = None
except Exception as exc:
    error = exc
tier_after = tier(p)
verdict(
    error is not None,
    "pickling a proxy managed by a ProxifyHostFile fails (and spills it to host as a side effect)",
    [
        versions(),
        f"control: unmanaged proxy pickle round trip ok: {bool(control_ok)}",
        f"pickle.dumps(store['k']) -> {error!r}",
        f"tier of the stored proxy before/after the failed pickle: {tier_before} -> {tier_after}",
        f"manager tallies after: {store.manager!r}",
    ],
)
store.clear()
del p
gc.collect()
