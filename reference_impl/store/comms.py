"""A proxy crosses distributed's comms as host frames, and lands as what it stood for.

A worker whose ``data`` is a ProxifyHostFile hands proxies to ``get_data``. A proxy
travels as its host payload (the d2h copy its store would spill, or the spilled frames
themselves), so sending never unspills and never allocates device memory.

Where it lands decides what it becomes:

- In a worker process whose ``data`` is a ProxifyHostFile (and no client lives there), it
  stays a host proxy. The worker stores it with ``data[key] = value``, so the store adopts it
  on the host tier and unspills it on use, after making room (dask-cuda's design, see
  ``docs/findings/reference.md#shuf-transfers``). Rebuilt on the device straight away,
  several fetched values at once would land outside the store's room.
- Anywhere else, a client in particular, it becomes the device object the task returned.

Registered by ``reference_impl.register()``, or lazily on the first dispatch of a reference
type (see ``reference_impl/registration.py``).
"""

from __future__ import annotations

import pickle
from typing import Any

from reference_impl.device.common import once

from .disk import SpillFile
from .proxy import ProxyObject, ProxyState, _rebuild_proxy, state_of, use_unmanaged
from .serialize import Payload


def _host_payload(proxy: ProxyObject) -> tuple[ProxyState, Payload]:
    """The proxy's state and its host frames, without unspilling it."""
    pxy = state_of(proxy)
    manager = pxy.manager()
    state = manager.proxy_host_state(pxy) if manager is not None else pxy.held
    if state is None or type(state) is SpillFile:
        from .errors import StoreClosedError

        raise StoreClosedError("cannot send a proxy whose spilled data was removed")
    if not isinstance(state, Payload):
        state = pxy.handler.to_host(state, pxy.device)  # a d2h copy, no device bytes
    return pxy, state


def lands_in_a_store() -> bool:
    """True in a worker process that stores values in a ProxifyHostFile and has no client:
    what arrives there is put in the store, which can hold it on the host tier."""
    try:
        from distributed.client import Client
        from distributed.worker import Worker
    except ImportError:
        return False
    from .hostfile import ProxifyHostFile

    if any(c.status not in ("closing", "closed") for c in list(Client._instances)):
        return False
    return any(isinstance(getattr(w, "data", None), ProxifyHostFile) for w in list(Worker._instances))


@once
def register_dask_serializers() -> None:
    """Idempotent; a no-op where distributed is not installed."""
    try:
        from distributed.protocol.serialize import dask_deserialize, dask_serialize
    except ImportError:
        return

    @dask_serialize.register(ProxyObject)
    def _serialize_proxy(proxy: ProxyObject) -> tuple[dict[str, Any], list[Any]]:
        pxy, payload = _host_payload(proxy)
        head = pickle.dumps((pxy.type_, pxy.meta, pxy.handler, payload.header), protocol=5)
        return {"proxy": 1}, [head, *payload.frames]

    @dask_deserialize.register(ProxyObject)
    def _deserialize_proxy(header: dict[str, Any], frames: list[Any]) -> Any:
        type_, meta, handler, payload_header = pickle.loads(frames[0])
        payload = Payload(payload_header, [memoryview(f).cast("B") for f in frames[1:]])
        proxy = _rebuild_proxy(payload, meta, type_, handler)
        if lands_in_a_store():
            return proxy
        return use_unmanaged(state_of(proxy))
