"""ProxyObject: a transparent stand-in for one device object that may be spilled.

The proxy itself holds no store lock and no store reference that pickling
would choke on (dask-cuda's managed proxies held an RLock and could not be
pickled): its state lives in a :class:`ProxyState`, and the store is reached
through a weak reference and the :class:`ProxyManager` protocol. Real use goes through the store, which touches
recency and unspills (making room first); ``type``, ``repr`` and cached
metadata such as ``nbytes`` never do.
"""

from __future__ import annotations

import copy
import operator
import weakref
from typing import Any, Protocol

from dask.sizeof import sizeof

from .disk import SpillFile
from .errors import StoreClosedError
from .serialize import Payload


class ProxyState:
    """A proxy's mutable state: what it stands for, and which store manages it.

    ``held`` is the one slot that holds the data, whatever its tier: the device object,
    its host :class:`Payload`, or its :class:`SpillFile` (None: removed when its store
    closed). The tier is read from it, so it cannot disagree with itself; a managed
    proxy's record says the same thing for the store's accounting.

    ``clean`` is the store's *clean copy* of an immutable value on device or host: the
    :class:`SpillFile` it was read back from, kept for its next spill (None: none). Held here,
    it is removed when the proxy dies, like a spilled proxy's own file.
    """

    __slots__ = ("held", "clean", "type_", "meta", "handler", "device", "manager_ref", "rec")

    def __init__(self, obj: Any, handler: Any, device: Any) -> None:
        self.held: Any = obj
        self.clean: SpillFile | None = None
        self.type_ = type(obj)
        self.meta = handler.metadata(obj)
        self.handler = handler
        self.device = device
        self.manager_ref: weakref.ref | None = None
        # The store's record of this proxy while a store manages it: a use reaches its
        # bookkeeping from here, with no lookup in a table as large as the store.
        self.rec: Any = None

    @property
    def tier(self) -> str:
        """``"device"``, ``"host"``, ``"disk"``, or ``"gone"`` (removed with its store)."""
        held = self.held
        kind = type(held)
        if kind is Payload:
            return "host"
        if kind is SpillFile:
            return "disk"
        return "gone" if held is None else "device"

    @property
    def obj(self) -> Any:
        """The device object, or None when it is not on the device."""
        held = self.held
        return None if type(held) in _OFF_DEVICE or held is None else held

    def manager(self) -> ProxyManager | None:
        ref = self.manager_ref
        return ref() if ref is not None else None


_OFF_DEVICE = (Payload, SpillFile)


class ProxyManager(Protocol):
    """What a proxy asks of the store that manages it (dask-cuda's ``ProxyManager`` role).

    A proxy reaches its manager through a weak reference and calls only these; a store
    implements them under its own lock. ``closed``: a store adopting a proxy asks whether its
    manager still holds it.
    """

    @property
    def closed(self) -> bool: ...

    def proxy_use(self, state: ProxyState) -> Any:
        """The device object for a real use: unspilled (after making room) and touched."""

    def proxy_touch(self, state: ProxyState) -> None:
        """A use answered from cached metadata: recency only, nothing moves."""

    def proxy_write_back(self, state: ProxyState, obj: Any) -> None:
        """Persist an in-place change made to ``obj``, a transient copy of a spilled proxy
        (or the device object itself, when the store keeps a clean copy that is stale now)."""

    def proxy_host_state(self, state: ProxyState) -> Any:
        """What pickling carries (the device object or host frames), without unspilling."""


def state_of(proxy: ProxyObject) -> ProxyState:
    """The state behind ``proxy`` (never unspills, never touches recency)."""
    return object.__getattribute__(proxy, "_pxy")


def _use(proxy: ProxyObject) -> Any:
    """The device object behind ``proxy``, unspilled if needed (real use)."""
    state = object.__getattribute__(proxy, "_pxy")  # inlined state_of: the hot path
    ref = state.manager_ref
    manager = ref() if ref is not None else None
    if manager is not None:
        return manager.proxy_use(state)
    return use_unmanaged(state)


def use_unmanaged(state: ProxyState) -> Any:
    """A proxy no store manages (unpickled, or its store closed) keeps its object itself."""
    held = state.held
    kind = type(held)
    if kind is not Payload:
        if held is None or kind is SpillFile:
            raise StoreClosedError(
                f"the store that spilled this {state.type_.__name__} to disk was closed; its data is gone"
            )
        return held
    state.held = obj = state.handler.to_device(held, state.device)
    return obj


def _mutated(proxy: ProxyObject, obj: Any) -> None:
    """After an in-place change: write back if ``obj`` was only a transient copy, and let
    the store drop a clean copy (a spill file kept for the value) that is stale now."""
    state = state_of(proxy)
    if state.held is not obj or state.clean is not None:
        manager = state.manager()
        if manager is not None:
            manager.proxy_write_back(state, obj)
    state.meta = state.handler.metadata(obj)


def unwrap(value: Any) -> Any:
    """``value`` with proxies (also inside lists, tuples and dicts) replaced by objects."""
    if type(value) is ProxyObject:
        return _use(value)
    if type(value) in (list, tuple):
        return type(value)(unwrap(v) for v in value)
    if type(value) is dict:
        return {k: unwrap(v) for k, v in value.items()}
    return value


def _rebuild_proxy(state: Any, meta: dict[str, Any], type_: type, handler: Any) -> ProxyObject:
    """Unpickle into an unmanaged proxy; a host payload stays serialized until used."""
    if isinstance(state, Payload):
        pxy = ProxyState.__new__(ProxyState)
        pxy.held = state
        pxy.clean = None
        pxy.type_ = type_
        pxy.meta = meta
        pxy.handler = handler
        pxy.device = _default_device_for(type_, handler, meta)
        pxy.manager_ref = None
        pxy.rec = None
        return ProxyObject(pxy)
    return ProxyObject(ProxyState(state, handler, None))


def _default_device_for(type_: type, handler: Any = None, meta: dict[str, Any] | None = None) -> Any:
    """The device an unpickled, spilled proxy unspills onto.

    A registered device type may answer itself (``handler.default_device(meta)``,
    from the metadata it recorded), so the store needs to know no such type.
    """
    hook = getattr(handler, "default_device", None)
    if hook is not None:
        return hook(meta or {})
    from reference_impl.device import SimArray, default_cuda_device, default_sim_device

    if issubclass(type_, SimArray):
        return default_sim_device()
    return default_cuda_device()  # the process's one GPU device, not a new one per proxy


class ProxyObject:
    """A transparent proxy: ``isinstance(p, SimArray)`` holds, operators and
    NumPy protocols work, and any real use brings the object back to device."""

    __slots__ = ("_pxy", "__weakref__")

    def __init__(self, state: ProxyState) -> None:
        object.__setattr__(self, "_pxy", state)

    # --- identity without unspilling -------------------------------------
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return state_of(self).type_

    def __repr__(self) -> str:
        d = state_of(self)
        shape = d.meta.get("shape")
        extra = f" shape={shape} dtype={d.meta.get('dtype')}" if shape is not None else ""
        return (
            f"<ProxyObject of {d.type_.__name__}{extra} nbytes={d.meta.get('nbytes')} "
            f"tier={d.tier} at {id(self):#x}>"
        )

    def __sizeof__(self) -> int:
        return int(state_of(self).meta.get("nbytes", 0))

    def __reduce__(self):
        d = state_of(self)
        manager = d.manager()
        state = manager.proxy_host_state(d) if manager is not None else d.held
        if state is None or type(state) is SpillFile:
            raise StoreClosedError("cannot pickle a proxy whose spilled data was removed")
        return _rebuild_proxy, (state, d.meta, d.type_, d.handler)

    # --- attributes -------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        state = state_of(self)
        meta = state.meta
        if name in meta:  # answered without unspilling, yet still a use: refresh recency
            manager = state.manager()
            if manager is not None:
                manager.proxy_touch(state)
            return meta[name]
        if name == "__cuda_array_interface__":
            # Reached only when the property below raised AttributeError (the object is no
            # CUDA array): the answer is no, and a probe must not bring the value back.
            raise AttributeError(name)
        return getattr(_use(self), name)

    def __setattr__(self, name: str, value: Any) -> None:
        obj = _use(self)
        setattr(obj, name, value)
        _mutated(self, obj)

    def __delattr__(self, name: str) -> None:
        obj = _use(self)
        delattr(obj, name)
        _mutated(self, obj)

    def __dir__(self) -> list[str]:
        return dir(_use(self))

    # --- container protocol ----------------------------------------------
    def __len__(self) -> int:
        meta = state_of(self).meta
        if "__len__" in meta:
            return meta["__len__"]
        return len(_use(self))

    def __getitem__(self, key: Any) -> Any:
        return _use(self)[unwrap(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        obj = _use(self)
        obj[unwrap(key)] = unwrap(value)
        _mutated(self, obj)

    def __delitem__(self, key: Any) -> None:
        obj = _use(self)
        del obj[unwrap(key)]
        _mutated(self, obj)

    def __iter__(self):
        return iter(_use(self))

    def __contains__(self, item: Any) -> bool:
        return unwrap(item) in _use(self)

    # --- conversions and hashing -----------------------------------------
    def __bool__(self) -> bool:
        return bool(_use(self))

    def __int__(self) -> int:
        return int(_use(self))

    def __float__(self) -> float:
        return float(_use(self))

    def __complex__(self) -> complex:
        return complex(_use(self))

    def __index__(self) -> int:
        return operator.index(_use(self))

    def __hash__(self) -> int:
        return hash(_use(self))

    def __str__(self) -> str:
        return str(_use(self))

    def __format__(self, spec: str) -> str:
        return format(_use(self), spec)

    def __copy__(self) -> Any:
        return copy.copy(_use(self))

    def __deepcopy__(self, memo: dict) -> Any:
        return copy.deepcopy(_use(self), memo)

    # --- NumPy protocols ---------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        obj = _use(self)
        if copy is None:
            return np.asarray(obj, dtype=dtype)
        return np.array(obj, dtype=dtype, copy=copy)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if "out" in kwargs:
            kwargs["out"] = tuple(unwrap(o) for o in kwargs["out"])
        return getattr(ufunc, method)(*unwrap(inputs), **unwrap(kwargs))

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*unwrap(args), **unwrap(kwargs))

    @property
    def __cuda_array_interface__(self) -> Any:
        if not hasattr(state_of(self).type_, "__cuda_array_interface__"):
            raise AttributeError(
                "__cuda_array_interface__ (the proxied object is not a CUDA array)"
            )
        return _use(self).__cuda_array_interface__


# ``ProxyObject(state)`` without the ``__init__`` call, for the set hot path.
_new_object = object.__new__
_set_state = ProxyObject._pxy.__set__  # type: ignore[attr-defined]


def _unary(op: Any) -> Any:
    def method(self: ProxyObject) -> Any:
        return op(_use(self))

    return method


def _binary(op: Any) -> Any:
    def method(self: ProxyObject, other: Any) -> Any:
        return op(_use(self), unwrap(other))

    return method


def _reflected(op: Any) -> Any:
    def method(self: ProxyObject, other: Any) -> Any:
        return op(unwrap(other), _use(self))

    return method


def _inplace(op: Any) -> Any:
    def method(self: ProxyObject, other: Any) -> Any:
        obj = _use(self)
        result = op(obj, unwrap(other))
        if result is obj:
            _mutated(self, obj)
            return self
        return result

    return method


_BINARY = [
    "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
    "lshift", "rshift", "and", "xor", "or",
]  # fmt: skip
for _name in _BINARY:
    _op = getattr(operator, f"{_name}_" if _name in ("and", "or") else _name)
    setattr(ProxyObject, f"__{_name}__", _binary(_op))
    setattr(ProxyObject, f"__r{_name}__", _reflected(_op))
    setattr(ProxyObject, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
ProxyObject.__divmod__ = _binary(divmod)  # type: ignore[attr-defined]
ProxyObject.__rdivmod__ = _reflected(divmod)  # type: ignore[attr-defined]
for _name in ("lt", "le", "eq", "ne", "gt", "ge"):
    setattr(ProxyObject, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(ProxyObject, f"__{_name}__", _unary(getattr(operator, _name)))


def _sizeof_proxy(proxy: ProxyObject) -> int:
    """dask asks every task output's size; answering must not unspill."""
    return int(state_of(proxy).meta.get("nbytes", 0))


def register_sizeof() -> None:
    """Teach ``dask.sizeof`` a proxy's size (called by ``reference_impl.register``)."""
    sizeof.register(ProxyObject)(_sizeof_proxy)
