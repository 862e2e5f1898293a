"""Candidate: spill-on-demand (the RMM failure callback) spills device->host but
never cascades host->disk, so host usage goes over memory_limit.

dask-cuda only builds its ``oom`` closure when ``import rmm.mr`` works; this
script lets ``initialize_spill_on_demand_once()`` build it against a minimal
stand-in for ``rmm.mr`` (see _common.install_oom_callback) and then calls the
closure the way RMM's FailureCallbackResourceAdaptor would.

Run: ../../../.venv-daskcuda/bin/python oom_skips_host_limit.py
"""
import gc

from _common import DevArray, install_oom_callback, new_store, tier, verdict, versions

ITEM = 1000
store = new_store(device_memory_limit=10 * ITEM, memory_limit=int(1.5 * ITEM))
oom = install_oom_callback(store)
for i in range(3):
    store[f"k{i}"] = DevArray(ITEM, i)
m = store.manager
before = (m._dev.mem_usage(), m._host.mem_usage(), m._disk.mem_usage())

retry = oom(3 * ITEM)  # RMM: "an allocation of 3 items failed"
gc.collect()
after = (m._dev.mem_usage(), m._host.mem_usage(), m._disk.mem_usage())
tiers_after = {k: tier(store[k]) for k in store}

store["k3"] = DevArray(ITEM, 3)  # the next store runs maybe_evict()
later = (m._dev.mem_usage(), m._host.mem_usage(), m._disk.mem_usage())
limit = m._host_memory_limit
verdict(
    after[1] > limit,
    "after spill-on-demand the host tier is over memory_limit (no host->disk cascade) "
    "until some later store operation runs maybe_evict()",
    [
        versions(),
        f"memory_limit (host) = {limit:,} B",
        f"(device, host, disk) bytes before oom = {before}",
        f"oom(3000) returned {retry}; after = {after}; tiers = {tiers_after}",
        f"after the next __setitem__ = {later}",
    ],
)
store.clear()
gc.collect()
