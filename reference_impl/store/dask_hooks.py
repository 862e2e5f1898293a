"""A proxy crosses distributed's comms as the object it stands for.

A worker whose ``data`` is a ProxifyHostFile hands proxies to ``get_data``;
pickled as proxies they would reach the client (or another worker) as
unmanaged ProxyObjects. Here a proxy serializes as its object, with that
object's own serializer (a Table or SimArray stays on a device), so a gathered
value arrives as what the task returned. Registered when the store package is
imported, which unpickling a ProxyObject type always does first.
"""

from __future__ import annotations

from typing import Any

from reference_impl.device.common import once


@once
def register_dask_serializers() -> None:
    """Idempotent; a no-op where distributed is not installed."""
    try:
        from distributed.protocol.serialize import (
            dask_deserialize,
            dask_serialize,
            deserialize,
            serialize,
        )
    except ImportError:
        return

    from .proxy import ProxyObject, _use

    @dask_serialize.register(ProxyObject)
    def _serialize_proxy(proxy: ProxyObject) -> tuple[dict[str, Any], list[Any]]:
        obj = _use(proxy)  # through the store: room is made before an unspill
        header, frames = serialize(obj, serializers=("dask", "pickle"), on_error="raise")
        return {"inner": header}, frames

    @dask_deserialize.register(ProxyObject)
    def _deserialize_proxy(header: dict[str, Any], frames: list[Any]) -> Any:
        return deserialize(header["inner"], frames)
