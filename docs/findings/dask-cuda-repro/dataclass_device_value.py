"""A device object inside a dataclass instance (or any type other than list,
tuple, set, frozenset and dict) is never proxified: the store holds its device
memory without counting it, and never spills it.

``proxify_device_objects`` says it will "Search through ``obj`` and wraps all
CUDA device objects in ProxyObject", but its dispatch only recurses into
list/tuple/set/frozenset and dict; any other object goes to
``proxify_device_object_default``, which wraps it only if it *is* a device
object (``hasattr(obj, "__cuda_array_interface__")``).

Deterministic.  Run: .venv-daskcuda/bin/python dataclass_device_value.py
"""

import dataclasses
import gc

from _common import DevArray, new_store, tier, verdict, versions


@dataclasses.dataclass
class Record:
    name: str
    data: object


# A device limit of 0: every device object the store knows about is spilled.
store = new_store(device_memory_limit=0, memory_limit=10**9)
store["in-dict"] = {"data": DevArray(4096, fill=1)}
store["in-dataclass"] = Record("r", DevArray(4096, fill=2))

in_dict = store["in-dict"]["data"]
in_dc = store["in-dataclass"].data
m = store.manager
evidence = [
    versions(),
    f"dict member: {type(in_dict).__name__}, tier {tier(in_dict)}",
    f"dataclass member: {type(in_dc).__name__} (not a proxy), still the stored device object",
    f"manager tallies: device {m._dev.mem_usage():,} B, host {m._host.mem_usage():,} B "
    f"({len(m)} proxies); the dataclass holds 4,096 device bytes",
]
confirmed = (
    type(in_dict).__name__ == "ProxyObject"
    and tier(in_dict) == "host"
    and type(in_dc) is DevArray
    and len(m) == 1
    and m._dev.mem_usage() == 0
)
verdict(
    confirmed,
    "a device object inside a dataclass is not proxified: uncounted and never spilled, "
    "even with a device limit of 0",
    evidence,
)
del in_dict, in_dc
store.clear()
gc.collect()
