"""What every broken adapter is built from: the reference wrapped without a bug.

A broken adapter wraps the reference store with ONE bug, injected from outside: a wrapping
mapping (:class:`Wrapped`), public attributes, the adapter's own methods, or, where no public
hook exists, the store's private names (tests/meta may touch them; the suite never does).
Each broken adapter says which SPEC.md clauses its bug breaks (``violates``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from conformance.adapters.reference import ReferenceAdapter


class Wrapped(MutableMapping):
    """Delegates to the real store; broken adapters override single methods."""

    def __init__(self, inner: Any, device: Any) -> None:
        self.inner = inner
        self.device = device
        self.sizes: dict[Any, int] = {}
        self.allocs: dict[Any, tuple[int, int]] = {}
        self.kept: list[Any] = []

    def __getitem__(self, key):
        return self.inner[key]

    def __setitem__(self, key, value):
        self.inner[key] = value
        self.sizes[key] = int(getattr(value, "nbytes", 0) or 0)
        if self.device.is_device_array(value):
            self.allocs[key] = self.device.allocation_of(value)
        else:
            self.allocs.pop(key, None)

    def __delitem__(self, key):
        del self.inner[key]
        self.sizes.pop(key, None)
        self.allocs.pop(key, None)

    def __iter__(self):
        return iter(self.inner)

    def __len__(self):
        return len(self.inner)

    def __contains__(self, key):
        return key in self.inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


class _Broken(ReferenceAdapter):
    wrapper = Wrapped

    def create_store(self, env):
        return self.wrapper(super().create_store(env), env.device)

    def inspect(self, store):
        return super().inspect(store.inner)

    def register_external(self, store, obj):
        return super().register_external(store.inner, obj)

    def evict(self, store, nbytes):
        return super().evict(store.inner, nbytes)

    def close_store(self, store):
        super().close_store(store.inner)


ZOO_PAIRS = "ZOO_PAIRS"  # set in a zoo process (tests/meta/zoo_select.py)
_ABSENT = object()


class PatchesProcess:
    """A broken adapter whose bug is a patch of the reference's own code, which is
    process-wide (a mixin, before the adapter's base).

    Run alone, the adapter patches when it is made. In a zoo process (``$ZOO_PAIRS`` set),
    ``zoo_select`` patches only while one of the adapter's own tests runs (:meth:`patched`)
    and undoes it after, so many such adapters share one process: each process costs seconds
    of imports and collection, and the store zoo ran 57 of them for a third of a second of
    test each. Subclasses write their bug in :meth:`patch` through :meth:`set`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._saved: list[tuple[Any, str, Any]] = []
        if os.environ.get(ZOO_PAIRS) is None:
            self.patch()

    def patch(self) -> None:
        raise NotImplementedError

    def set(self, owner: Any, attr: str, value: Any) -> None:
        """``setattr(owner, attr, value)``, remembered so that :meth:`unpatch` undoes it."""
        if isinstance(owner, type) or inspect.ismodule(owner):
            old = vars(owner).get(attr, _ABSENT)  # an inherited attribute is deleted again
        else:
            old = getattr(owner, attr)
        self._saved.append((owner, attr, old))
        setattr(owner, attr, value)

    def set_item(self, mapping: Any, key: Any, value: Any) -> None:
        """``mapping[key] = value``, remembered like :meth:`set`."""
        self._saved.append((mapping, key, mapping.get(key, _ABSENT)))
        mapping[key] = value

    def unpatch(self) -> None:
        while self._saved:
            owner, name, old = self._saved.pop()
            if isinstance(owner, dict):
                if old is _ABSENT:
                    del owner[name]
                else:
                    owner[name] = old
            elif old is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, old)

    @contextmanager
    def patched(self) -> Iterator[None]:
        try:  # a patch() that raises half way is undone as far as it went
            self.patch()
            yield
        finally:
            self.unpatch()


class Patching(PatchesProcess, _Broken):
    """A broken store whose bug is a process-wide patch (:class:`PatchesProcess`)."""


class _OwnOomHandler:
    """Spill-on-demand done by the adapter (the store's own handler is turned off)."""

    def __init__(self, store, cascade: bool) -> None:
        import weakref

        self.store_ref = weakref.ref(store)
        self.cascade = cascade

    raise_when_empty = False

    def __call__(self, shortfall: int) -> bool:
        store = self.store_ref()
        if store is None:
            return False
        if self.raise_when_empty and store.snapshot().device_bytes == 0:
            raise TypeError("nothing left to spill")  # dask-cuda: format_bytes(None)
        if self.cascade:
            return store.evict(max(1, shortfall)) > 0
        limit = store.memory_limit
        store.memory_limit = None  # evict device -> host only, like dask-cuda's oom closure
        try:
            return store.evict(max(1, shortfall)) > 0
        finally:
            store.memory_limit = limit


class _OwnOom(_Broken):
    handler = _OwnOomHandler
    cascade = True
    raise_when_empty = False
    remove_on_close = True

    def create_store(self, env):
        import reference_impl

        inner = reference_impl.ProxifyHostFile(
            device=env.device,
            device_memory_limit=env.device_limit,
            memory_limit=env.host_limit,
            local_directory=env.spill_dir,
            spill_on_demand=False,
        )
        store = self.wrapper(inner, env.device)
        store.oom = self.handler(inner, self.cascade)
        store.oom.raise_when_empty = self.raise_when_empty
        env.device.add_oom_handler(store.oom)
        return store

    def close_store(self, store):
        if self.remove_on_close:
            store.device.remove_oom_handler(store.oom)
        super().close_store(store)


def keep_copies(directory: str, suffix: str = ".kept") -> None:
    """Hard-link every spill file under ``directory``: deleting the original leaves a copy
    (how the bugs that forget to unlink a file are simulated)."""
    for root, _d, files in os.walk(directory):
        for fn in files:
            if not fn.endswith(suffix):
                p = os.path.join(root, fn)
                try:
                    os.link(p, p + suffix)
                except OSError:
                    pass
