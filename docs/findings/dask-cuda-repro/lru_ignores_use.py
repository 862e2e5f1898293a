"""Candidate: recency (last_access) is not updated when a device-resident proxy
is used, so eviction is "least recently stored/unspilled", not LRU.

Run: ../../../.venv-daskcuda/bin/python lru_ignores_use.py
"""
import time

from _common import DevArray, new_store, tier, verdict, versions

ITEM = 1000
store = new_store(device_memory_limit=2 * ITEM, memory_limit=None)
store["k1"] = DevArray(ITEM, 1)
time.sleep(0.01)
store["k2"] = DevArray(ITEM, 2)
time.sleep(0.01)

k1 = store["k1"]
before = k1._pxy_get().last_access
# Use k1 (it is device-resident): attribute access, a read, a computation.
_ = k1.nbytes
_ = int(k1.buf.sum())
_ = store["k1"].buf[0]
after = k1._pxy_get().last_access
time.sleep(0.01)

store["k3"] = DevArray(ITEM, 3)  # over the limit by one item: one eviction
t = {k: tier(store[k]) for k in ("k1", "k2", "k3")}
confirmed = after == before and t["k1"] == "host" and t["k2"] == "device"
verdict(
    confirmed,
    "using a device-resident proxy does not refresh its recency; the most "
    "recently *used* key is evicted before a colder one",
    [
        versions(),
        f"k1.last_access before use={before:.6f} after use={after:.6f} (unchanged: {after == before})",
        f"after storing k3 with room for 2 items: tiers={t} (LRU would evict k2, the least recently used)",
    ],
)
