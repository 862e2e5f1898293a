"""The closed capability vocabulary.

An adapter declares what it supports with strings from this module; an unknown
string is a usage error (it is almost always a typo). Tests declare what they
need with ``@requires(...)``; a test whose capability is not declared is
reported as N/A, never as a pass.

Capabilities name features, never failure modes: declaring a feature implies
the faults of that feature (SPEC.md, "What a feature implies"), so a store that
loses data on a full disk FAILs wherever it declares a disk tier, and is never
N/A. A capability exists only where an implementation can honestly lack the
feature. Names that were removed map to what replaced them (``REMOVED``).
"""

from __future__ import annotations

CAPABILITY_VERSION = "2026.1"

STORE_CAPABILITIES: dict[str, str] = {
    "store": "a MutableMapping that keeps device values in tiers (create_store/inspect/close_store)",
    "store.spill.host": "values over the device limit move to a host tier",
    "store.spill.disk": "values can move to files in env.spill_dir",
    "store.limit.host": "a host limit (env.host_limit) cascades host -> disk",
    "store.unspill.on_access": "store[key] brings a spilled value back to the device",
    "store.lru.strict": "device-resident keys are always a most-recently-used suffix; inspect() reports lru",
    "store.alias.dedup": "views/aliases of one allocation are counted once",
    "store.external": "register_external(obj) tracks objects outside the mapping (weakly)",
    "store.oom.on_demand": "the store registers an OOM handler and spills when the device is full",
    "store.evict.manual": "the store has evict(nbytes) -> freed",
    "store.threadsafe": "concurrent use from many threads is safe",
    "store.spill.authenticated": "spill files are authenticated: a file swapped between keys or "
    "stores, or carrying a payload, is rejected before anything is deserialized (10.3-10.5)",
    "store.pickle": "values returned by the store pickle and unpickle correctly",
    "store.proxy": "hands out proxies: store[key] returns device leaves as proxies that stay the "
    "stored value wherever it is; every use of one is an access",
    "store.table": "a device table (reference_impl.Table: many device buffers) is one value",
}

SHUFFLE_CAPABILITIES: dict[str, str] = {
    "shuffle": "shuffle(inputs, on, npartitions, env) -> npartitions pyarrow Tables",
    "shuffle.device": "workers hold the data on the device the suite gives each of them",
    "shuffle.bounded": "peak memory per worker <= memory_budget + the largest partition",
    "shuffle.spill": "with data several times the aggregate budget, shards spill",
    "shuffle.nulls": "null keys are shuffled (all to one partition), not rejected",
    "shuffle.recover": "worker-loss tolerant: a worker killed mid-shuffle, once or again in the "
    "restart, gives the correct result (14.5, 14.21)",
    "shuffle.checks": "bad arguments raise a clear error before any data moves",
    "shuffle.dtypes": "dictionary, decimal, date, time and halffloat columns shuffle exactly (14.22)",
    "shuffle.nested": "list, large list, fixed-size list, struct and map columns shuffle exactly, "
    "never refused (14.22)",
    "shuffle.destinations": "shuffle_to(inputs, column, npartitions, env): each row to the output "
    "its destination column names, bad destinations refused naming the column (14.26)",
    "shuffle.dask": "a shuffle method of dask's DataFrame API (the adapter's dask_method): "
    "meta kept (14.27); merge, groupby split_out, set_index, sort_values as with tasks (14.28)",
    "shuffle.lazy": "a lazy front end (a dask collection): a partition's schema is known only as "
    "it is computed, so one that differs may be refused after other transfers ran (14.12)",
}

ALL_CAPABILITIES: frozenset[str] = frozenset(STORE_CAPABILITIES) | frozenset(SHUFFLE_CAPABILITIES)

# Removed names -> why, and what to declare instead (a usage error quotes it).
REMOVED: dict[str, str] = {
    "store.faults.disk": "the faults of a disk tier (a full disk, failed writes) are implied by "
    "'store.spill.disk' (SPEC 9.6); declare that",
    "store.integrity": "damaged, truncated and removed spill files are implied by "
    "'store.spill.disk' (SPEC 10.1, 10.2, 10.6, 10.7); authentication is "
    "'store.spill.authenticated' (SPEC 10.3-10.5)",
    "shuffle.faults.worker": "every shuffle is judged with worker kills (SPEC 14.5, 14.24); "
    "nothing to declare: drop it",
    "shuffle.faults.recover": "renamed 'shuffle.recover'",
}


def unknown_capabilities(caps) -> list[str]:
    """The entries of ``caps`` that are not in the vocabulary, sorted."""
    return sorted(str(c) for c in caps if c not in ALL_CAPABILITIES and c not in REMOVED)


def removed_capabilities(caps) -> list[str]:
    """One line per removed name in ``caps``, naming its replacement, sorted."""
    return sorted(f"{c!r} was removed: {REMOVED[c]}" for c in caps if c in REMOVED)
