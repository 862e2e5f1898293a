"""A zoo process holds many adapters whose bugs patch the reference process-wide
(``broken_base.Patching``): each patch must change the reference while one of the adapter's
tests runs and leave nothing behind, or one adapter's bug would fail another's test and the zoo
would credit the suite with a catch it did not make."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import broken_adapters
import pytest
from broken_base import Patching

import reference_impl

PATCHING = sorted(n for n, (cls, _cid) in broken_adapters.EXPECTED.items() if issubclass(cls, Patching))


def _fingerprint() -> dict[tuple[str, ...], int]:
    """The identity of every module attribute, class attribute and function code object of
    the reference, and of the store's device-type registry."""
    out: dict[tuple[str, ...], int] = {}
    mods = [reference_impl] + [
        importlib.import_module(m.name)
        for m in pkgutil.walk_packages(reference_impl.__path__, "reference_impl.")
    ]
    for mod in mods:
        for name, value in list(vars(mod).items()):
            out[(mod.__name__, name)] = id(value)
            if isinstance(value, type) and value.__module__ == mod.__name__:
                for attr, member in list(vars(value).items()):
                    out[(mod.__name__, name, attr)] = id(member)
                    funcs = (member.fget, member.fset) if isinstance(member, property) else (
                        getattr(member, "__func__", member),
                    )
                    for i, func in enumerate(funcs):
                        if inspect.isfunction(func):
                            out[(mod.__name__, name, attr, f"__code__{i}")] = id(func.__code__)
            elif isinstance(value, types.FunctionType):
                out[(mod.__name__, name, "__code__")] = id(value.__code__)
    from reference_impl.store import dispatch

    for cls, handler in list(dispatch._registry.items()):
        out[("registry", cls.__qualname__)] = id(handler)
    return out


@pytest.fixture
def zoo_process(monkeypatch):
    monkeypatch.setenv("ZOO_PAIRS", "[]")  # as in a zoo process: adapters do not patch when made


def test_the_store_zoo_has_patching_adapters():
    assert len(PATCHING) >= 40, PATCHING


@pytest.mark.parametrize("name", PATCHING)
def test_a_patch_changes_the_reference_only_while_it_is_on(zoo_process, name):
    adapter = broken_adapters.EXPECTED[name][0]()
    before = _fingerprint()
    assert _fingerprint() == before  # the fingerprint itself is stable
    with adapter.patched():
        during = _fingerprint()
        assert adapter._saved, f"{name}: patch() changed nothing through set()"
    changed = {k for k in before.keys() | during.keys() if before.get(k) != during.get(k)}
    assert changed, f"{name}: patched, yet no attribute of the reference changed"
    after = _fingerprint()
    left = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not left, f"{name}: left behind after its tests: {sorted(left)}"


def test_alone_an_adapter_patches_when_made(monkeypatch):
    monkeypatch.delenv("ZOO_PAIRS", raising=False)
    before = _fingerprint()
    adapter = broken_adapters.EXPECTED["mutant_sizeof_unspills"][0]()
    try:
        assert _fingerprint() != before
    finally:
        adapter.unpatch()
    assert _fingerprint() == before


def test_an_inherited_attribute_is_deleted_again(zoo_process):
    class Base:
        def f(self):
            return "base"

    class Child(Base):
        pass

    class Adapter(Patching):
        def patch(self):
            self.set(Child, "f", lambda self: "patched")
            self.set_item(registry, "k", 2)
            self.set_item(registry, "new", 3)

    registry = {"k": 1}
    adapter = Adapter()
    with adapter.patched():
        assert Child().f() == "patched" and registry == {"k": 2, "new": 3}
    assert "f" not in vars(Child) and Child().f() == "base"
    assert registry == {"k": 1}


def test_a_patch_made_past_set_is_seen_left_behind(zoo_process):
    from reference_impl.store import disk

    class Leaky(Patching):
        def patch(self):
            self.set(disk, "IOV_MAX", 7)
            disk.SpillDir.read = lambda self, file, key: b""  # not through set(): never undone

    real = disk.SpillDir.read
    before = _fingerprint()
    try:
        with Leaky().patched():
            pass
        assert disk.IOV_MAX != 7
        left = {k for k in before if before[k] != _fingerprint().get(k)}
        assert ("reference_impl.store.disk", "SpillDir", "read") in left, left
        assert {k[:3] for k in left} == {("reference_impl.store.disk", "SpillDir", "read")}
    finally:
        disk.SpillDir.read = real
