"""Candidate: a proxy whose finalizer runs while an eviction holds it is
re-registered after the finalizer removed it, and never removed again: the
manager's tally keeps its bytes for good (found by STORE-THREAD-006 under the
suite's seeded scheduler, 2026-12-07).

ProxyObject.__del__ calls manager.remove(self), which waits for manager.lock.
While a finalizer runs on the last reference, CPython has not cleared the
object's weak references yet, so ProxyManager.evict (under manager.lock) can
still find the proxy through Proxies.get_proxies_by_ids and keep it in its list
of proxies to serialize; it serializes them after releasing the lock.  If the
finalizer's remove() runs in that window, the eviction's _pxy_set() then adds
the proxy to the host tier; when the eviction drops it, the proxy dies without a
second __del__ (PEP 442: a finalizer runs once), so the host tier keeps a dead
weak reference and the proxy's bytes.

The interleaving the scheduler found is forced here without changing dask-cuda:
the main thread holds manager.lock (an RLock) while another thread drops the
last reference (its __del__ then waits for the lock), calls
ProxyManager.evict with a serializer that only records the proxy, releases the
lock, waits for the finalizer to finish, and then serializes the proxy with
dask-cuda's own device-to-host serializer (what evict would have done next).

Run: ../../../.venv-daskcuda/bin/python finalizer_resurrection_leaks_tally.py
"""

import gc
import sys
import threading
import time

from _common import DevArray, new_store, verdict, versions

store = new_store(device_memory_limit=10**9, memory_limit=10**9)
manager = store.manager
store["k"] = DevArray(16384, fill=1)
box = [store["k"]]  # the proxy; the store's own reference goes next
del store["k"]
gc.collect()
gc.disable()  # nothing but the reference count decides when the proxy dies
tally_before = (manager._dev.mem_usage(), manager._host.mem_usage())


def drop_last_reference():
    box.pop()  # refcount 0: ProxyObject.__del__ runs here and waits for manager.lock


manager.lock.acquire()
dropper = threading.Thread(target=drop_last_reference)
dropper.start()
deadline = time.monotonic() + 10
in_finalizer = False
while time.monotonic() < deadline and not in_finalizer:
    frame = sys._current_frames().get(dropper.ident)
    while frame is not None and not in_finalizer:
        in_finalizer = frame.f_code.co_name == "__del__"
        frame = frame.f_back
    time.sleep(0.01)
held = []
manager.evict(nbytes=1, proxies_access=manager._dev.buffer_info, serializer=held.append)
manager.lock.release()
dropper.join(10)
finalizer_done = not dropper.is_alive()
after_finalizer = (manager._dev.mem_usage(), manager._host.mem_usage())
n_held = len(held)
for proxy in held:  # what evict does next: dask-cuda's device-to-host serializer
    proxy._pxy_serialize(serializers=("dask", "pickle"))
proxy = None
held.clear()  # the eviction's list goes: the proxy dies, __del__ is not called again
gc.enable()
gc.collect()
dead = [pid for pid, ref in manager._host._proxy_id_to_proxy.items() if ref() is None]
tally_after = (manager._dev.mem_usage(), manager._host.mem_usage())

verdict(
    in_finalizer and finalizer_done and n_held == 1 and bool(dead) and tally_after[1] > 0,
    "a proxy evicted while its finalizer runs is re-registered on host after the finalizer "
    "removed it, and its bytes stay in the host tally after it died",
    [
        versions(),
        f"(device, host) tally with the proxy alive and its key deleted: {tally_before}",
        f"the finalizer was waiting for manager.lock when evict ran: {in_finalizer}; it "
        f"finished: {finalizer_done}; proxies evict found and held: {n_held}",
        f"(device, host) tally after the finalizer's remove(): {after_finalizer}",
        f"(device, host) tally after the eviction serialized it and let it go: {tally_after}",
        f"host tier entries whose proxy is dead: {len(dead)}; store keys: {list(store)}",
    ],
)
