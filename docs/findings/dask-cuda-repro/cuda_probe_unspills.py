"""Candidate: probing a spilled proxy with ``hasattr(p, "__cuda_array_interface__")`` (what
CUDA libraries do to tell device arrays apart) brings the proxied object back to the device,
also when it is no CUDA array (a cuDF DataFrame is one: dask-cuda proxies it, and it has no
such attribute), and the answer is then "no".

``DevFrame`` stands in for a cuDF DataFrame: a device object without the interface, proxied
the way dask-cuda proxies ``cudf.DataFrame`` (proxify_device_objects.py l.242-250).

Run: ../../../.venv-daskcuda/bin/python cuda_probe_unspills.py
"""
from _common import DevArray, new_store, tier, verdict, versions
from dask.sizeof import sizeof
from dask_cuda.proxify_device_objects import dispatch, proxify
from dask_cuda.proxy_object import ProxyObject

ITEM = 1000


class DevFrame:
    """A device object that is no CUDA array (its buffer, ``data``, is)."""

    def __init__(self, fill: int):
        self.data = DevArray(ITEM, fill)


@dispatch.register(DevFrame)
def _proxify_devframe(obj, proxied_id_to_proxy, found_proxies, excl_proxies):
    return proxify(obj, proxied_id_to_proxy, found_proxies)


@sizeof.register(DevFrame)
def _sizeof_devframe(x):
    return x.data.nbytes


store = new_store(device_memory_limit=2 * ITEM, memory_limit=None)
store["a"] = DevFrame(1)
store["b"] = DevFrame(2)
store["c"] = DevFrame(3)  # over the limit by one item: a, the oldest, is spilled
pa = store["a"]
before = tier(pa)
answer = hasattr(pa, "__cuda_array_interface__")
after = tier(pa)
confirmed = type(pa) is ProxyObject and before == "host" and after == "device" and not answer
verdict(
    confirmed,
    "hasattr(proxy, '__cuda_array_interface__') on a spilled proxy of a non-CUDA device "
    "object deserializes it back to the device, then answers False",
    [
        versions(),
        f"type(store['a']) is ProxyObject: {type(pa) is ProxyObject}",
        f"a's tier before the probe: {before}; the probe answered {answer}; tier after: {after}",
        "cause: ProxyObject has no __cuda_array_interface__ of its own, so the probe reaches "
        "ProxyObject.__getattr__, which returns getattr(self._pxy_deserialize(), name) "
        "(proxy_object.py l.458-467)",
    ],
)
