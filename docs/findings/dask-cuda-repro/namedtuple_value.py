"""A namedtuple holding a device object cannot be stored, and a failed overwrite
loses the key's old value.

``proxify_device_object_python_collection`` (registered for list, tuple, set and
frozenset, so for every tuple subclass too) rebuilds the container with
``type(seq)(generator)``.  A namedtuple's ``__new__`` takes its fields as
positional arguments, so that call raises ``TypeError: ...__new__() missing ...
required positional argument``.  ``ProxifyHostFile.__setitem__`` deletes an
existing key before it proxifies the new value, so the failed set leaves the key
gone.

Deterministic.  Run: .venv-daskcuda/bin/python namedtuple_value.py
"""

import gc
from collections import namedtuple

from _common import DevArray, new_store, verdict, versions

Pair = namedtuple("Pair", "left right")

store = new_store(device_memory_limit=10_000, memory_limit=100_000)
evidence = [versions()]

# 1. A fresh key: the set raises.
try:
    store["fresh"] = Pair(DevArray(100, fill=1), "meta")
    fresh_error = None
except TypeError as exc:
    fresh_error = exc
evidence.append(f"store['fresh'] = Pair(DevArray, 'meta') -> {fresh_error!r}")

# A namedtuple with host members only goes through the same dispatch.
try:
    store["host-only"] = Pair(1, 2)
    host_error = None
except TypeError as exc:
    host_error = exc
evidence.append(f"store['host-only'] = Pair(1, 2) -> {host_error!r}")

# 2. An existing key: the old value is deleted before the new one fails.
store["k"] = DevArray(100, fill=7)
before = "k" in store
try:
    store["k"] = Pair(DevArray(100, fill=2), DevArray(100, fill=3))
    overwrite_error = None
except TypeError as exc:
    overwrite_error = exc
after = "k" in store
evidence.append(
    f"'k' in store before the overwrite: {before}; overwrite -> {overwrite_error!r}; "
    f"'k' in store after: {after}"
)

# A plain tuple with the same members stores fine (the dispatch is the same one).
store["t"] = (DevArray(100, fill=1), "meta")
evidence.append(f"a plain tuple stores fine: type {type(store['t']).__name__}")

confirmed = (
    isinstance(fresh_error, TypeError)
    and isinstance(host_error, TypeError)
    and isinstance(overwrite_error, TypeError)
    and before
    and not after
)
verdict(
    confirmed,
    "a namedtuple value raises TypeError in proxify (type(seq)(generator)), and a failed "
    "overwrite loses the key's old value",
    evidence,
)
store.clear()
gc.collect()
