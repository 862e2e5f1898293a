"""Everything the reference installs in dask and distributed, in one explicit call.

Importing any part of ``reference_impl`` registers nothing, so a process that judges a
peer (zict, dask-cuda) with the conformance suite runs the peer, not the reference's
serializers. :func:`register` is called where the reference is actually used: the root
package's store and table names, the reference adapters, the shuffle's client API, worker
set-up and preload.

A process that only *receives* reference objects (a plain dask worker unpickling a Table
or a ProxyObject) never calls it itself; for it the root package hands :func:`register` to
dask's own lazy hook (``Dispatch.register_lazy("reference_impl", register)``, how dask
registers cupy and cudf) in the dispatch tables already imported. A hook registers nothing
until a ``reference_impl`` type is dispatched, and the tables are never imported for it:
in a process where distributed is loaded after the reference, an explicit call is needed.
"""

from __future__ import annotations

import sys

from .device.common import once

PACKAGE = "reference_impl"
# (module, attribute) of every dask/distributed dispatch table a reference type is put in.
DISPATCHERS = (
    ("dask.sizeof", "sizeof"),
    ("distributed.protocol.serialize", "dask_serialize"),
    ("distributed.protocol.serialize", "dask_deserialize"),
    ("distributed.protocol.cuda", "cuda_serialize"),
    ("distributed.protocol.cuda", "cuda_deserialize"),
)


@once
def register() -> None:
    """Install the reference's hooks; idempotent and thread-safe.

    The store learns that a Table is one device object; dask's serialization learns to
    keep SimArrays, Tables and ProxyObjects on (or off) their devices across comms, and
    the shuffle's HostShards; dask's ``sizeof`` learns a Table's and a proxy's device bytes.
    """
    from .device.sim_comms import register_dask_serializers as sim_arrays
    from .shuffle.comms import register_dask_serializers as host_shards
    from .store.comms import register_dask_serializers as proxies
    from .store.proxy import register_sizeof as proxy_sizes
    from .table.comms import register_dask_hooks as tables
    from .table.spill import register as tables_in_stores

    tables_in_stores()
    sim_arrays()
    proxies()
    proxy_sizes()
    tables()
    host_shards()


def register_lazily() -> None:
    """Hand :func:`register` to each dispatch table already imported (never importing one)."""
    for module, attr in DISPATCHERS:
        mod = sys.modules.get(module)
        table = getattr(mod, attr, None) if mod is not None else None
        if table is not None:
            table.register_lazy(PACKAGE, register)
